//! The tools over HTTP: the list for a context, and execution as JSON or as
//! an event stream of the call's ToolEvents followed by the result.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use data_plane_registry::{NoCallbacks, ToolEvent};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::context::{context, default_profile, require_member, with_profile};
use super::extract::{Json, Path, Query};
use super::sse::{self, WireEvent};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolsQuery {
    space_id: Option<Uuid>,
    /// The agent profile whose tools to list (default `service` for a
    /// service token, `chat` for a person).
    agent: Option<String>,
}

/// `GET /v1/tools?spaceId=&agent=`: the tools offered to the caller under
/// the profile (default: `service` for a service, `chat` for a person),
/// OpenAI format.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Query(q): Query<ToolsQuery>,
) -> Result<Json<Value>, ApiError> {
    if let Some(space) = q.space_id {
        require_member(&state, &caller, space).await?;
    }
    let agent = q.agent.as_deref().unwrap_or(default_profile(&caller));
    let ctx = context(&state, &caller, q.space_id, &headers).await?;
    let ctx = with_profile(&state, &caller, ctx, agent, "agent")?;
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
    /// The agent profile the call runs under (default `service` for a
    /// service token, `chat` for a person).
    agent: Option<String>,
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
    let agent = body.agent.as_deref().unwrap_or(default_profile(&caller));
    let mut ctx = with_profile(&state, &caller, ctx, agent, "agent")?;
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

    let (out, rx) = tokio::sync::mpsc::unbounded_channel::<Execution>();
    let registry = state.registry.clone();
    let metrics = state.metrics.clone();
    // The call runs in its own task; dropping the stream (client gone) aborts it.
    let task = tokio::spawn(async move {
        let send = |event: ToolEvent| {
            let sent = out.send(Execution::Tool(Box::new(event))).is_ok();
            std::future::ready(sent)
        };
        let Some(result) = registry
            .execute_streaming(&name, body.args, &ctx, send)
            .await
        else {
            return;
        };
        metrics.tool_call(&result);
        let _ = out.send(Execution::End(End::Done {
            success: result.success,
        }));
    });
    let guard = AbortOnDrop(task);
    let stream = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv().await.map(|e| (e, (rx, guard)))
    });
    Ok(sse::response(stream))
}

/// What executeTool's event stream sends: the call's events, then `done`
/// saying whether it succeeded (the result is the `tool_result` before it).
#[derive(Serialize)]
#[serde(untagged)]
enum Execution {
    Tool(Box<ToolEvent>),
    End(End),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum End {
    Done { success: bool },
}

impl WireEvent for Execution {
    fn name(&self) -> &str {
        match self {
            Execution::Tool(event) => event.name(),
            Execution::End(End::Done { .. }) => "done",
        }
    }
}

/// Aborts a task when the response stream that owns it is dropped.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
