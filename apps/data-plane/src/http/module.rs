//! The module protocol for other orchestrators: `GET /manifest` describes
//! every tool (the remote modules' too, as `module.tool`), `POST /execute`
//! runs one for a user the service names. Same registry, same pipeline;
//! service tokens only.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use data_plane_registry::NoCallbacks;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::context::{SERVICE_PROFILE, context, require_member, with_profile};
use super::extract::Json;
use crate::auth::{Caller, Service, user_for_service};
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /manifest`: the module's name, version and every tool with its
/// definition and metadata (what each needs and costs).
pub async fn manifest(State(state): State<AppState>, _service: Service) -> Json<Value> {
    state.modules.ensure_fresh_later();
    let tools: Vec<Value> = state
        .registry
        .tools()
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "definition": t.openai_tool(),
                "metadata": t.metadata(),
            })
        })
        .collect();
    Json(json!({
        "name": "data-plane",
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": "data-plane-module/1",
        "execute": "/execute",
        "tools": tools,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecuteBody {
    tool_name: String,
    #[serde(default)]
    arguments: Value,
    user_id: Uuid,
    space_id: Option<Uuid>,
    call_id: Option<String>,
    /// The calling orchestrator's request, carried into logs and the audit.
    request_id: Option<String>,
}

/// `POST /execute`: `{tool_name, arguments, user_id, space_id?, call_id?,
/// request_id?}` → the ToolResult.
pub async fn execute(
    State(state): State<AppState>,
    service: Service,
    headers: HeaderMap,
    Json(body): Json<ExecuteBody>,
) -> Result<Response, ApiError> {
    let permission = user_for_service(&state, body.user_id).await?;
    let caller = Caller {
        user_id: body.user_id,
        permission,
        service: Some(service.name),
    };
    // A space the user is not a member of (or one that does not exist) is
    // refused before anything runs, with the same answer either way.
    if let Some(space) = body.space_id {
        require_member(&state, &caller, space).await?;
    }
    let ctx = context(&state, &caller, body.space_id, &headers).await?;
    let mut ctx = with_profile(&state, &caller, ctx, SERVICE_PROFILE, "agent")?;
    if let Some(request_id) = body.request_id.filter(|r| !r.is_empty() && r.len() <= 200) {
        ctx = ctx.with_request_id(request_id);
    }
    if let Some(call_id) = body.call_id.filter(|c| !c.is_empty() && c.len() <= 200) {
        ctx = ctx.with_call_id(call_id);
    }
    let result = state
        .registry
        .execute_tool(&body.tool_name, body.arguments, &ctx, &NoCallbacks)
        .await;
    state.metrics.tool_call(&result);
    Ok(Json(result).into_response())
}
