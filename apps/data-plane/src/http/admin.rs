//! Admins only: `GET/PUT /v1/admin/settings`, run-time settings (a change
//! is stored in PostgreSQL and every replica reads it on its next request),
//! and `GET /v1/admin/modules` with `POST /v1/admin/modules/refresh`, the
//! remote tool modules.

use axum::extract::State;
use data_plane_modules::{ModuleError, ModuleStatus};
use data_plane_registry::Settings;
use data_plane_store::Scope;
use data_plane_store::identity::Permission;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::extract::Json;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

fn require_admin(caller: &Caller, what: &str) -> Result<(), ApiError> {
    if caller.permission < Permission::Admin {
        return Err(ApiError::forbidden(format!("{what} by admins only")));
    }
    Ok(())
}

const SETTINGS: &str = "settings can be read and changed";
const MODULES: &str = "modules can be listed and refreshed";

/// `GET /v1/admin/settings`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Settings>, ApiError> {
    require_admin(&caller, SETTINGS)?;
    Ok(Json(state.stored_settings().await?))
}

/// `PUT /v1/admin/settings`: any subset of the settings; the rest keep
/// their values. Unknown keys and wrong types are refused, naming them.
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Json(changes): Json<Map<String, Value>>,
) -> Result<Json<Settings>, ApiError> {
    require_admin(&caller, SETTINGS)?;
    let updated = state
        .stored_settings()
        .await?
        .apply(&changes)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    // A configured module's tool may be named before this replica has
    // discovered it; a name that is no tool's would never apply.
    let known = |name: &str| {
        let remote = name.split_once('.').is_some_and(|(module, tool)| {
            !tool.is_empty() && state.modules.names().iter().any(|m| m == module)
        });
        remote || state.registry.get(name).is_some_and(|t| t.name == name)
    };
    if let Some(Value::Object(tools)) = changes.get("tool_rate_limits") {
        for name in tools.keys() {
            if !known(name) {
                return Err(ApiError::bad_request(format!(
                    "tool_rate_limits names {name:?}, which is not a tool's name (nor module.tool of a configured module)"
                )));
            }
        }
    }
    if changes.contains_key("approvals") {
        for name in &updated.approvals.tools {
            // `module.*` names every tool of a configured module.
            if !known(name) {
                return Err(ApiError::bad_request(format!(
                    "approvals.tools names {name:?}, which is not a tool's name (nor module.tool or module.* of a configured module)"
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
    let version = data_plane_store::settings::version(&mut tx).await?;
    tx.commit()
        .await
        .map_err(data_plane_store::StoreError::from)?;
    // Answered once every replica holds the change, so that any request
    // after this answer, wherever it lands, applies it.
    let heard = state
        .settings_cache
        .wait_until_heard(version)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, version, "cannot tell whether every replica holds a settings change");
            not_yet_everywhere()
        })?;
    if !heard {
        return Err(not_yet_everywhere());
    }
    tracing::info!(user = %caller.user_id, settings = ?updated, "settings changed");
    Ok(Json(updated))
}

/// The change is stored, but not every replica has confirmed holding it.
fn not_yet_everywhere() -> ApiError {
    ApiError::new(
        crate::error::ErrorCode::Unavailable,
        "the change is stored, but not every replica has confirmed it yet; \
         GET /v1/admin/settings shows what is stored, and every replica applies it within seconds",
    )
}

/// `GET /v1/admin/modules`: each configured module with its URL, state,
/// tools, last discovery and last error, as this replica holds it.
pub async fn modules(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, MODULES)?;
    Ok(Json(json!({ "modules": state.modules.status() })))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefreshBody {
    /// Only this module; every one when left out.
    module: Option<String>,
}

/// `POST /v1/admin/modules/refresh` `{module?}`: discovers every module (or
/// the one named) now, whatever the cache says; answers how each stands
/// afterwards. The other replicas take the new manifests from PostgreSQL.
pub async fn refresh_modules(
    State(state): State<AppState>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, MODULES)?;
    let body: RefreshBody = if body.iter().all(u8::is_ascii_whitespace) {
        RefreshBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?
    };
    let only = body.module;
    let refreshed: Vec<ModuleStatus> =
        state
            .modules
            .refresh(only.as_deref())
            .await
            .map_err(|e| match e {
                e @ ModuleError::Unknown { .. } => ApiError::not_found(e.to_string()),
                other => ApiError::bad_request(other.to_string()),
            })?;
    tracing::info!(user = %caller.user_id, module = ?only, "modules refreshed");
    Ok(Json(json!({ "modules": refreshed })))
}
