//! `POST /v1/chat`: one conversation turn as a run (docs/runs.md) and its
//! event stream. The run belongs to the server, not to this response: a
//! client that goes away can reattach (`GET /v1/runs/{id}/events`) within
//! the grace period, after which the run is stopped.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse as _, Response};
use data_plane_agent::prompt::{PromptFacts, SpaceFacts};
use data_plane_agent::{ChatRequest, Message};
use data_plane_registry::ToolMode;
use serde::Deserialize;
use uuid::Uuid;

use super::context::{CHAT_PROFILE, check_space, context, with_profile};
use super::extract::Json;
use super::sse::{self, StreamFormat};
use super::ui_stream;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChatBody {
    /// The conversation so far, in OpenAI's chat format, or as the AI
    /// SDK's UI messages (`parts`; docs/ai-sdk.md).
    messages: Vec<serde_json::Value>,
    space_id: Option<Uuid>,
    #[serde(default)]
    options: ChatOptions,
    /// What the AI SDK's chat transport sends beside the messages (the
    /// chat's id, why it sends, the message to regenerate); read by nobody.
    #[serde(default, rename = "id")]
    _chat_id: Option<serde_json::Value>,
    #[serde(default, rename = "trigger")]
    _trigger: Option<serde_json::Value>,
    #[serde(default, rename = "messageId")]
    _message_id: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChatOptions {
    /// At most the server's DATA_PLANE_MAX_STEPS.
    max_steps: Option<u32>,
    temperature: Option<f32>,
    /// Output tokens per model request, at most DATA_PLANE_MODEL_MAX_TOKENS.
    max_tokens: Option<u32>,
    /// Seconds the whole turn may take, at most DATA_PLANE_TURN_DEADLINE.
    deadline_secs: Option<u64>,
    /// The agent profile (default `chat`): which tools the model is offered.
    agent: Option<String>,
    /// Offer the discovery meta-tools instead of the whole list (default:
    /// the profile's).
    tool_search: Option<bool>,
    /// `native` (function calling) or `tags` (one-line tags in the text,
    /// for models without function calling); default: the profile's.
    tool_mode: Option<ToolMode>,
    /// The conversation this turn continues (the `conversation_id` of an
    /// earlier turn's `run` event): approvals given with "remember" there
    /// hold here. Default: a new conversation.
    conversation_id: Option<Uuid>,
    /// `events` (this server's events, the default) or `ui-message` (the
    /// AI SDK's UI message stream, also asked for with the header
    /// `x-vercel-ai-ui-message-stream: v1`).
    format: Option<StreamFormat>,
}

/// `POST /v1/chat`: `run` first, then `text_delta`, `tool_call`,
/// `tool_result`, `subagent_*` and `approval_*` events as they happen, then
/// `done` or `error` (docs/events.md).
pub async fn chat(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Json(body): Json<ChatBody>,
) -> Result<Response, ApiError> {
    let Some(agent) = state.agent.clone() else {
        return Err(ApiError::new(
            ErrorCode::NoModel,
            "no language model is configured on this server; set DATA_PLANE_MODEL (and OPENAI_BASE_URL, OPENAI_API_KEY)",
        ));
    };
    if body.messages.is_empty() {
        return Err(ApiError::bad_request(
            "messages: at least one message is needed",
        ));
    }
    let ui_stream = body.options.format == Some(StreamFormat::UiMessage)
        || (body.options.format.is_none() && ui_stream::wanted(&headers));
    // The SDK continues its last assistant message (after an approval or a
    // tool result the client added) rather than starting one.
    let continuing = body
        .messages
        .last()
        .is_some_and(|m| m.get("role").and_then(serde_json::Value::as_str) == Some("assistant"));
    let messages: Vec<Message> = ui_stream::openai_messages(body.messages)
        .map_err(ApiError::bad_request)
        .and_then(|messages| {
            messages
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    serde_json::from_value(m)
                        .map_err(|e| ApiError::bad_request(format!("messages[{i}]: {e}")))
                })
                .collect()
        })?;
    if let Some(steps) = body.options.max_steps
        && steps == 0
    {
        return Err(ApiError::bad_request(
            "options.maxSteps: must be at least 1",
        ));
    }
    if let Some(t) = body.options.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(ApiError::bad_request(format!(
            "options.temperature: {t} is outside 0 to 2"
        )));
    }
    if body.options.max_tokens == Some(0) {
        return Err(ApiError::bad_request(
            "options.maxTokens: must be at least 1",
        ));
    }
    if body.options.deadline_secs == Some(0) {
        return Err(ApiError::bad_request(
            "options.deadlineSecs: must be at least 1",
        ));
    }
    let space = match body.space_id {
        Some(id) => {
            let space = check_space(&state, &caller, id).await?;
            Some(SpaceFacts {
                name: space.name,
                description: space.description,
            })
        }
        None => None,
    };
    let ctx = context(&state, &caller, body.space_id, &headers).await?;
    let agent_profile = body.options.agent.as_deref().unwrap_or(CHAT_PROFILE);
    let mut ctx = with_profile(&state, &caller, ctx, agent_profile, "options.agent")?;
    if let Some(search) = body.options.tool_search {
        ctx.tool_search = search;
    }
    if let Some(mode) = body.options.tool_mode {
        ctx.tool_mode = mode;
    }
    let permit = match state.chat_limits.admit(caller.user_id) {
        Ok(permit) => permit,
        Err(refusal) => {
            tracing::info!(user = %caller.user_id, ?refusal, "chat turn refused");
            return Ok(refusal.into_response());
        }
    };
    let request = ChatRequest {
        messages,
        max_steps: body.options.max_steps,
        temperature: body.options.temperature,
        max_tokens: body.options.max_tokens,
        deadline: body
            .options
            .deadline_secs
            .map(|s| std::time::Duration::from_secs(s.min(86_400))),
        facts: Some(PromptFacts {
            space,
            today: chrono::Utc::now().date_naive(),
        }),
        waiting: None,
    };

    let started = state
        .runs
        .begin(
            agent,
            request,
            ctx,
            body.options.conversation_id,
            Box::new(permit),
        )
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "cannot record a new run");
            ApiError::new(
                ErrorCode::Unavailable,
                "the chat run could not be recorded; try again shortly",
            )
        })?;
    let events = state.runs.events(started.run_id, 0);
    // The response reads it now; from here its stream counts as the reader.
    drop(started.watching);
    let mut response = if ui_stream {
        ui_stream::response(events, 0, continuing)
    } else {
        sse::run_events(events)
    };
    if let Ok(value) = HeaderValue::from_str(&started.run_id.to_string()) {
        response.headers_mut().insert("x-run-id", value);
    }
    Ok(response)
}
