//! `/v1/runs/{id}`: a chat run's state, its events again (replayed after
//! `Last-Event-ID`, then live, on any replica), stop, and the answer to an
//! approval it waits for. Only the run's user, or an admin, reaches a run;
//! to anyone else it does not exist.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use data_plane_runs::{ApprovalRow, RunRow};
use data_plane_store::Scope;
use data_plane_store::runs::{self as store, Answer};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::extract::{Json, Path, Query};
use super::sse::{self, StreamFormat};
use super::ui_stream;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Longest reason a person may give with an answer, in characters.
const MAX_REASON: usize = 2000;

async fn visible_run(state: &AppState, caller: &Caller, run_id: Uuid) -> Result<RunRow, ApiError> {
    store::get(&state.db, Scope::User(caller.user_id), run_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {run_id} not found")))
}

fn approval_json(a: &ApprovalRow) -> Value {
    json!({
        "call_id": a.call_id,
        "tool": a.tool,
        "arguments": a.arguments,
        "annotations": a.annotations,
        "why": a.why,
        "parent_call_id": a.parent_call_id,
        "status": a.status,
        "reason": a.reason,
        "remember": a.remember,
        "created_at": a.created_at,
        "expires_at": a.expires_at,
        "answered_at": a.answered_at,
    })
}

/// `GET /v1/runs/{id}`: the run's state and the approvals it waits for.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(run_id): Path<Uuid>,
) -> Result<Json<Value>, ApiError> {
    let run = visible_run(&state, &caller, run_id).await?;
    let pending = store::pending(&state.db, Scope::User(caller.user_id), run_id).await?;
    Ok(Json(json!({
        "run_id": run.id,
        "conversation_id": run.conversation_id,
        "space_id": run.space_id,
        "status": run.status,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "last_event_id": run.last_seq,
        "pending_approvals": pending.iter().map(approval_json).collect::<Vec<_>>(),
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// The last event id the client has; the header `Last-Event-ID` wins.
    after: Option<i64>,
    /// `events` (the default) or `ui-message` (the AI SDK's stream, also
    /// asked for with `x-vercel-ai-ui-message-stream: v1`).
    format: Option<StreamFormat>,
}

/// `GET /v1/runs/{id}/events`: every event after `Last-Event-ID` (or
/// `?after=`; from the start without either), then the new ones live,
/// until the run's last.
pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Path(run_id): Path<Uuid>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let after = match headers.get("last-event-id") {
        Some(value) => {
            let text = value.to_str().unwrap_or_default().trim();
            text.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "Last-Event-ID: {text:?} is not an event id of this run (a whole number)"
                ))
            })?
        }
        None => query.after.unwrap_or(0),
    };
    if after < 0 {
        return Err(ApiError::bad_request(format!("after: {after} is below 0")));
    }
    visible_run(&state, &caller, run_id).await?;
    let ui = query.format == Some(StreamFormat::UiMessage)
        || (query.format.is_none() && ui_stream::wanted(&headers));
    if ui {
        // Translated from the start: a chunk depends on the events before it.
        return Ok(ui_stream::response(
            state.runs.events(run_id, 0),
            after,
            false,
        ));
    }
    Ok(sse::run_events(state.runs.events(run_id, after)))
}

/// `POST /v1/runs/{id}/stop`: stops the run at once and answers when it has
/// stopped, with how it ended (a run that had ended already says how).
pub async fn stop(
    State(state): State<AppState>,
    caller: Caller,
    Path(run_id): Path<Uuid>,
) -> Result<Json<Value>, ApiError> {
    let run = visible_run(&state, &caller, run_id).await?;
    if run.status != data_plane_runs::RunStatus::Running {
        return Ok(Json(
            json!({ "run_id": run_id, "status": run.status, "stopped": false }),
        ));
    }
    let status = state.runs.stop(run_id).await.map_err(|e| {
        tracing::warn!(%run_id, error = %e, "cannot stop a run");
        ApiError::new(
            crate::error::ErrorCode::Unavailable,
            "the run could not be stopped; try again shortly",
        )
    })?;
    Ok(Json(json!({
        "run_id": run_id,
        "status": status,
        "stopped": status == data_plane_runs::RunStatus::Stopped,
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerBody {
    approved: bool,
    reason: Option<String>,
    /// Approve this tool for the rest of the conversation.
    #[serde(default)]
    remember: bool,
}

/// `POST /v1/runs/{id}/approvals/{callId}`: answers a call waiting for
/// approval; the run goes on on whichever replica runs it.
pub async fn answer(
    State(state): State<AppState>,
    caller: Caller,
    Path((run_id, call_id)): Path<(Uuid, String)>,
    Json(body): Json<AnswerBody>,
) -> Result<Json<Value>, ApiError> {
    visible_run(&state, &caller, run_id).await?;
    let reason = body
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    if let Some(r) = reason
        && r.chars().count() > MAX_REASON
    {
        return Err(ApiError::bad_request(format!(
            "reason: at most {MAX_REASON} characters"
        )));
    }
    let answer = Answer {
        approved: body.approved,
        reason,
        remember: body.remember,
        by: caller.user_id,
    };
    let settled = store::answer(
        &state.db,
        Scope::User(caller.user_id),
        run_id,
        &call_id,
        &answer,
    )
    .await?;
    match settled {
        None => Err(ApiError::not_found(format!(
            "run {run_id} has no approval for call {call_id:?}"
        ))),
        Some((row, true)) => Ok(Json(json!({
            "run_id": run_id,
            "call_id": row.call_id,
            "status": row.status,
            "approved": body.approved,
            "remember": row.remember,
        }))),
        Some((row, false)) => {
            let status = serde_json::to_value(row.status).unwrap_or_default();
            let status = status.as_str().unwrap_or_default();
            let why = if status == "pending" {
                "it has expired".to_string()
            } else {
                format!("it is {status} already")
            };
            Err(ApiError::conflict(format!(
                "the approval of call {call_id:?} cannot be answered: {why}"
            )))
        }
    }
}
