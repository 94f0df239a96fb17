//! `POST /v1/chat`: one conversation turn as an event stream. The agent runs
//! in a task owned by the response stream; when the client goes away the
//! stream is dropped, which cancels the run, its model request and its tools.

use async_trait::async_trait;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse as _, Response};
use data_plane_agent::prompt::{PromptFacts, SpaceFacts};
use data_plane_agent::{AgentError, AgentEvent, ChatRequest, EventSink, Message};
use data_plane_registry::ToolMode;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::extract::Json;
use super::sse::{self, StreamEvent};
use super::tools::{AbortOnDrop, check_space, context, with_profile};
use super::{ApiError, ErrorCode};
use crate::auth::Caller;
use crate::state::AppState;

/// Events buffered per stream before the agent waits for the client: a slow
/// reader holds up its own run and nothing else.
const STREAM_BUFFER: usize = 64;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChatBody {
    /// The conversation so far, in OpenAI's chat format.
    messages: Vec<Message>,
    space_id: Option<Uuid>,
    #[serde(default)]
    options: ChatOptions,
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
}

/// The profile of /v1/chat unless `options.agent` names another.
pub const CHAT_PROFILE: &str = "chat";

/// Delivers the agent's events to the response stream.
struct StreamSink(mpsc::Sender<StreamEvent>);

#[async_trait]
impl EventSink for StreamSink {
    async fn emit(&self, event: AgentEvent) -> bool {
        self.0.send(StreamEvent::tagged(&event)).await.is_ok()
    }
}

/// `POST /v1/chat`: `text_delta`, `tool_call`, `tool_result` and `subagent_*`
/// events as they happen, then `done` or `error` (docs/events.md).
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
    if let Some(profile) = state.registry.profile(agent_profile)
        && !profile.spec.chat
    {
        let choices: Vec<&str> = state
            .registry
            .profiles()
            .values()
            .filter(|p| p.spec.chat)
            .map(|p| p.name())
            .collect();
        return Err(ApiError::bad_request(format!(
            "options.agent: the profile {agent_profile:?} is not for chat; choose one of {}",
            choices.join(", ")
        )));
    }
    let mut ctx = with_profile(&state, ctx, agent_profile, "options.agent")?;
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
        messages: body.messages,
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
    };

    let (tx, rx) = mpsc::channel::<StreamEvent>(STREAM_BUFFER);
    let cancel = CancellationToken::new();
    let run_cancel = cancel.clone();
    let task = tokio::spawn(async move {
        // The run's place is freed when this task ends or is aborted.
        let _permit = permit;
        let sink = StreamSink(tx.clone());
        let last = match agent.run(request, &ctx, &sink, &run_cancel).await {
            Ok(outcome) => StreamEvent::new(
                "done",
                json!({
                    "reason": outcome.reason,
                    "steps": outcome.steps,
                    "usage": outcome.usage,
                }),
            ),
            // The client is gone: there is no one to tell.
            Err(AgentError::Cancelled) => return,
            Err(e) => {
                tracing::warn!(request_id = %ctx.request_id, code = e.code(), error = %e, "chat ended with an error");
                StreamEvent::new(
                    "error",
                    json!({ "code": e.code(), "message": public_message(&e) }),
                )
            }
        };
        let _ = tx.send(last).await;
    });
    // Dropped with the response stream: cancels the run and aborts its task.
    let guard = (AbortOnDrop(task), cancel.drop_guard());
    let stream = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv().await.map(|e| (e, (rx, guard)))
    });
    Ok(sse::response(stream))
}

/// What the client is told; the endpoint's address stays in the log.
fn public_message(e: &AgentError) -> String {
    match e {
        AgentError::Unreachable { .. } => "the language model cannot be reached".into(),
        other => other.to_string(),
    }
}
