//! The tools over HTTP: the list for a context, and execution as JSON or as
//! an event stream of the call's ToolEvents followed by the result.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use data_plane_registry::{ChannelCallbacks, NoCallbacks, ToolContext};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::ApiError;
use super::extract::{Json, Path, Query};
use super::sse::{self, StreamEvent};
use crate::auth::Caller;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolsQuery {
    space_id: Option<Uuid>,
    /// The agent profile whose tools to list (default `service`).
    agent: Option<String>,
}

/// The profile of executeTool over HTTP and the module protocol, and the
/// default of the tool list.
pub const SERVICE_PROFILE: &str = "service";

/// Builds the context of a call: who, where, settings as stored now, the
/// remote modules' tools as fresh as they can be.
pub async fn context(
    state: &AppState,
    caller: &Caller,
    space_id: Option<Uuid>,
    headers: &HeaderMap,
) -> Result<ToolContext, ApiError> {
    // Every door lists or runs tools after this: a remote module whose
    // manifest expired is asked again first.
    state.modules.ensure_fresh().await;
    let settings = state.settings().await?;
    let request_id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 200)
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_string);
    Ok(
        ToolContext::new(caller.user_id, space_id, caller.permission)
            .with_settings(settings)
            .with_request_id(request_id)
            .with_deployment(state.deployment.now()),
    )
}

/// `ctx` under the agent profile `name`, or a 400 naming the known ones.
pub fn with_profile(
    state: &AppState,
    ctx: ToolContext,
    name: &str,
    field: &str,
) -> Result<ToolContext, ApiError> {
    state
        .registry
        .with_profile(ctx, name)
        .map_err(|e| ApiError::bad_request(format!("{field}: {e}")))
}

/// Refuses a space the caller cannot read, with the same answer as a
/// missing one. Answered from the caller's cached identity (a space missing
/// from it is looked up afresh first, so a membership just granted on
/// another replica counts at once). What a removal's notification has not
/// reached yet is still refused further in: built-in tools read under
/// row-level security, and a remote module's tool checks the membership in
/// the database before the module is called.
pub async fn require_member(
    state: &AppState,
    caller: &Caller,
    space_id: Uuid,
) -> Result<(), ApiError> {
    match crate::access::role_in(state, caller, space_id).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(format!(
            "no space {space_id} among the caller's spaces"
        ))),
    }
}

/// The space, or a refusal when the caller cannot read it, with the same
/// answer as a missing one.
pub async fn check_space(
    state: &AppState,
    caller: &Caller,
    space_id: Uuid,
) -> Result<data_plane_store::identity::Space, ApiError> {
    let mut tx = state
        .db
        .begin(data_plane_store::Scope::User(caller.user_id))
        .await?;
    let space = data_plane_store::identity::space_by_id(&mut tx, space_id).await?;
    tx.commit()
        .await
        .map_err(data_plane_store::StoreError::from)?;
    match space {
        Some(space) => Ok(space),
        None => Err(ApiError::not_found(format!(
            "no space {space_id} among the caller's spaces"
        ))),
    }
}

/// `GET /v1/tools?spaceId=&agent=`: the tools offered to the caller under
/// the profile (default `service`), OpenAI format.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Query(q): Query<ToolsQuery>,
) -> Result<Json<Value>, ApiError> {
    if let Some(space) = q.space_id {
        require_member(&state, &caller, space).await?;
    }
    let agent = q.agent.as_deref().unwrap_or(SERVICE_PROFILE);
    let ctx = context(&state, &caller, q.space_id, &headers).await?;
    let ctx = with_profile(&state, ctx, agent, "agent")?;
    Ok(Json(json!({
        "agent": agent,
        "tools": state.registry.get_available_tools(&ctx),
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExecuteBody {
    #[serde(default)]
    args: Value,
    space_id: Option<Uuid>,
    /// The caller's id for this call (echoed in the result and events).
    call_id: Option<String>,
}

/// `POST /v1/tools/{name}/execute`: the ToolResult as JSON, or with
/// `Accept: text/event-stream` its ToolEvents as events, then the result.
/// A tool failure is a ToolResult (200), not an HTTP error.
pub async fn execute(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(name): Path<String>,
    Json(body): Json<ExecuteBody>,
) -> Result<Response, ApiError> {
    if let Some(space) = body.space_id {
        require_member(&state, &caller, space).await?;
    }
    let ctx = context(&state, &caller, body.space_id, &headers).await?;
    let mut ctx = with_profile(&state, ctx, SERVICE_PROFILE, "agent")?;
    if let Some(call_id) = body.call_id.filter(|c| !c.is_empty() && c.len() <= 200) {
        ctx = ctx.with_call_id(call_id);
    }
    if !sse::wants_stream(&headers) {
        let result = state
            .registry
            .execute_tool(&name, body.args, &ctx, &NoCallbacks)
            .await;
        state.metrics.tool_call(&result);
        return Ok(Json(result).into_response());
    }

    let (callbacks, mut events) = ChannelCallbacks::new();
    let (out, rx) = tokio::sync::mpsc::unbounded_channel::<StreamEvent>();
    let registry = state.registry.clone();
    let metrics = state.metrics.clone();
    // The call runs in its own task; dropping the stream (client gone) aborts it.
    let task = tokio::spawn(async move {
        let call = registry.execute_tool(&name, body.args, &ctx, &callbacks);
        tokio::pin!(call);
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                Some(event) = events.recv() => {
                    let _ = out.send(StreamEvent::tagged(&event));
                }
            }
        };
        // Everything the call reported was sent before it returned.
        while let Ok(event) = events.try_recv() {
            let _ = out.send(StreamEvent::tagged(&event));
        }
        metrics.tool_call(&result);
        let _ = out.send(StreamEvent::new(
            "done",
            json!({ "success": result.success }),
        ));
    });
    let guard = AbortOnDrop(task);
    let stream = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv().await.map(|e| (e, (rx, guard)))
    });
    Ok(sse::response(stream))
}

/// Aborts a task when the response stream that owns it is dropped.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
