//! `POST /v1/chat`: one conversation turn as a run (docs/runs.md) and its
//! event stream. The run belongs to the server, not to this response: a
//! client that goes away can reattach (`GET /v1/runs/{id}/events`) within
//! the grace period, after which the run is stopped. What the turn was
//! asked is saved with the run, so that another replica can continue it
//! should this one die ([`ChatResumer`]).

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse as _, Response};
use data_plane_agent::prompt::{PromptFacts, SpaceFacts};
use data_plane_agent::{ChatRequest, Message};
use data_plane_registry::{ToolContext, ToolMode};
use data_plane_runs::{ResumedTurn, Resumer, RunRow};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::context::{CHAT_PROFILE, context, space_facts, with_profile};
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

#[derive(Debug, Default, Deserialize, Serialize)]
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
    let ui_stream = body.options.format == Some(StreamFormat::UiMessage)
        || (body.options.format.is_none() && ui_stream::wanted(&headers));
    // The SDK continues its last assistant message (after an approval or a
    // tool result the client added) rather than starting one.
    let continuing = body
        .messages
        .last()
        .is_some_and(|m| m.get("role").and_then(serde_json::Value::as_str) == Some("assistant"));
    let options = body.options;
    let messages = conversation(body.messages)?;
    options.check()?;
    let space = match body.space_id {
        Some(id) => Some(space_facts(&state, &caller, id).await?),
        None => None,
    };
    let ctx = turn_context(&state, &caller, &headers, body.space_id, &options).await?;
    let saved = serde_json::to_value(SavedTurn {
        messages: messages.clone(),
        service: caller.service.clone(),
        request_id: ctx.request_id.clone(),
        today: chrono::Utc::now().date_naive(),
        options: &options,
    })
    .map_err(|e| ApiError::bad_request(format!("messages: {e}")))?;
    let permit = match state.chat_limits.admit(caller.user_id) {
        Ok(permit) => permit,
        Err(refusal) => {
            tracing::info!(user = %caller.user_id, ?refusal, "chat turn refused");
            return Ok(refusal.into_response());
        }
    };
    let request = options.request(messages, space);
    let started = state
        .runs
        .begin(
            agent,
            request,
            ctx,
            options.conversation_id,
            saved,
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

/// The conversation as the model reads it: OpenAI's messages, or the AI
/// SDK's UI messages turned into them; at least one.
fn conversation(messages: Vec<serde_json::Value>) -> Result<Vec<Message>, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::bad_request(
            "messages: at least one message is needed",
        ));
    }
    ui_stream::openai_messages(messages)
        .map_err(ApiError::bad_request)?
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            serde_json::from_value(m)
                .map_err(|e| ApiError::bad_request(format!("messages[{i}]: {e}")))
        })
        .collect()
}

/// The turn's tool context: the caller's, under the profile the options
/// name (the one rule of every door), with their discovery and tool mode.
async fn turn_context(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    space_id: Option<Uuid>,
    options: &ChatOptions,
) -> Result<ToolContext, ApiError> {
    let ctx = context(state, caller, space_id, headers).await?;
    let profile = options.agent.as_deref().unwrap_or(CHAT_PROFILE);
    let mut ctx = with_profile(state, caller, ctx, profile, "options.agent")?;
    if let Some(search) = options.tool_search {
        ctx.tool_search = search;
    }
    if let Some(mode) = options.tool_mode {
        ctx.tool_mode = mode;
    }
    Ok(ctx)
}

impl ChatOptions {
    /// Refuses values outside their bounds, naming the option.
    fn check(&self) -> Result<(), ApiError> {
        if self.max_steps == Some(0) {
            return Err(ApiError::bad_request(
                "options.maxSteps: must be at least 1",
            ));
        }
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(ApiError::bad_request(format!(
                "options.temperature: {t} is outside 0 to 2"
            )));
        }
        if self.max_tokens == Some(0) {
            return Err(ApiError::bad_request(
                "options.maxTokens: must be at least 1",
            ));
        }
        if self.deadline_secs == Some(0) {
            return Err(ApiError::bad_request(
                "options.deadlineSecs: must be at least 1",
            ));
        }
        Ok(())
    }

    /// The agent's request for this turn.
    fn request(&self, messages: Vec<Message>, space: Option<SpaceFacts>) -> ChatRequest {
        self.request_on(messages, space, chrono::Utc::now().date_naive())
    }

    fn request_on(
        &self,
        messages: Vec<Message>,
        space: Option<SpaceFacts>,
        today: chrono::NaiveDate,
    ) -> ChatRequest {
        ChatRequest {
            messages,
            max_steps: self.max_steps,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            deadline: self
                .deadline_secs
                .map(|s| std::time::Duration::from_secs(s.min(86_400))),
            facts: Some(PromptFacts { space, today }),
            waiting: None,
        }
    }
}

/// What a turn saves with its run: enough for another replica to ask the
/// same of the agent, as the same caller (docs/runs.md, "Takeover"). The
/// caller's permission is not kept: it is read afresh.
#[derive(Serialize)]
struct SavedTurn<'a> {
    messages: Vec<Message>,
    service: Option<String>,
    request_id: String,
    /// The date the system prompt gave, kept across midnight.
    today: chrono::NaiveDate,
    options: &'a ChatOptions,
}

/// [`SavedTurn`] read back.
#[derive(Deserialize)]
struct Saved {
    messages: Vec<Message>,
    service: Option<String>,
    request_id: String,
    today: chrono::NaiveDate,
    options: ChatOptions,
}

/// Rebuilds a chat turn that another replica began, for this one to
/// continue: the same caller (whose space must still be theirs to read),
/// the same profile and options, the settings as stored now.
pub struct ChatResumer(pub AppState);

#[async_trait::async_trait]
impl Resumer for ChatResumer {
    fn can_continue(&self) -> bool {
        self.0.agent.is_some()
    }

    async fn chat(&self, row: &RunRow, saved: &serde_json::Value) -> Result<ResumedTurn, String> {
        let state = &self.0;
        let agent = state
            .agent
            .clone()
            .ok_or("no language model is configured on this server")?;
        let saved: Saved = serde_json::from_value(saved.clone())
            .map_err(|e| format!("what the run saved cannot be read: {e}"))?;
        // The permission the database holds now, as every request uses:
        // a person demoted since the turn began continues as they are now.
        let identity = state
            .identities
            .get(row.user_id)
            .await
            .map_err(|e| format!("the run's user cannot be read: {e}"))?
            .ok_or("the run's user no longer exists")?;
        let caller = Caller {
            user_id: row.user_id,
            permission: identity.permission,
            service: saved.service,
        };
        let refused = |e: ApiError| e.message().to_string();
        let space = match row.space_id {
            Some(id) => Some(space_facts(state, &caller, id).await.map_err(refused)?),
            None => None,
        };
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_str(&saved.request_id) {
            headers.insert("x-request-id", value);
        }
        let ctx = turn_context(state, &caller, &headers, row.space_id, &saved.options)
            .await
            .map_err(refused)?;
        let request = saved.options.request_on(saved.messages, space, saved.today);
        // The turn was admitted when it began; its place is taken again if
        // there is one, and the turn goes on regardless.
        let hold: Box<dyn Send + Sync> = match state.chat_limits.admit(caller.user_id) {
            Ok(permit) => Box::new(permit),
            Err(_) => Box::new(()),
        };
        Ok(ResumedTurn {
            agent,
            request,
            ctx,
            hold,
        })
    }
}
