//! Long calls as MCP tasks (the tasks extension, `io.modelcontextprotocol/tasks`,
//! SEP-2663, as rmcp implements it; docs/mcp.md, "Tasks"). A call of a
//! client that declared the extension on its request runs as a task when
//! its tool may take minutes, or when the request asks: `tools/call`
//! answers at once with the task, the call runs as a run of its own (the
//! runs table: recorded, alive-checked, stopped from any replica, kept for
//! the runs' retention), and `tasks/get` and `tasks/cancel` reach it from
//! any replica.

use std::time::Duration;

use chrono::{DateTime, Utc};
use data_plane_registry::ToolContext;
use data_plane_runs::{Call, CallOutcome, CallRun, RunStatus};
use data_plane_store::Scope;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CancelTaskParams, CreateTaskResult, DetailedTask, GetTaskParams,
    GetTaskResult, Task, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use uuid::Uuid;

use super::tools::call_result;
use super::{McpServer, caller_of};

/// A tool whose calls may take this long runs as a task whenever the
/// client can take one.
const LONG: Duration = Duration::from_secs(60);

/// How often a client is asked to poll.
const POLL_EVERY_MS: u64 = 1_000;

/// The request `_meta` key by which a client asks for a task.
pub(super) const ASK_FOR_TASK: &str = "data-plane/task";

/// How a tool's calls become tasks, as its `_meta` says
/// ([`ASK_FOR_TASK`]): `always` for a long tool, `on_request` for the
/// rest.
pub(super) fn task_support(timeout: Duration) -> &'static str {
    if always_a_task(timeout) {
        "always"
    } else {
        "on_request"
    }
}

/// Whether a tool's calls may take so long that they run as tasks
/// whenever the client can take one.
fn always_a_task(timeout: Duration) -> bool {
    timeout >= LONG
}

impl McpServer {
    /// Whether this call runs as a task: the request declared the tasks
    /// extension, and the tool is a long one or the request asks.
    pub(super) fn runs_as_task(&self, rq: &RequestContext<RoleServer>, tool: &str) -> bool {
        let declared = rq
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if !declared {
            return false;
        }
        let asked = rq.meta.0.0.get(ASK_FOR_TASK).and_then(Value::as_bool) == Some(true);
        asked
            || self
                .state
                .registry
                .get(tool)
                .is_some_and(|entry| always_a_task(entry.meta.timeout))
    }

    /// Starts the call as a task and answers with it once it is recorded:
    /// counted against the caller's runs (as a chat turn is), refused as
    /// the call's error when they are all taken.
    pub(super) async fn start_task(
        &self,
        tool: String,
        args: Value,
        ctx: ToolContext,
    ) -> Result<CallToolResponse, McpError> {
        let permit = match self.state.chat_limits.admit(ctx.user_id) {
            Ok(permit) => permit,
            Err(refusal) => {
                let result = data_plane_registry::ToolResult::failed(
                    &tool,
                    ctx.call_id.as_deref().unwrap_or_default(),
                    &data_plane_registry::ToolError::new(
                        data_plane_registry::ErrorCode::RateLimited,
                        refusal.message(),
                    ),
                    0,
                );
                return Ok(call_result(&result).into());
            }
        };
        let metrics = self.state.metrics.clone();
        let call = Call {
            tool: tool.clone(),
            args,
            ended: Box::new(move |result| metrics.tool_call(result)),
        };
        let run_id = self
            .state
            .runs
            .begin_call(self.state.registry.clone(), call, ctx, Box::new(permit))
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, tool, "a task could not be started");
                McpError::internal_error("the task could not be started; try again", None)
            })?;
        let now = stamp(Utc::now());
        let task = Task::new(run_id.to_string(), TaskStatus::Working, now.clone(), now)
            .with_status_message(format!("{tool} is running"));
        Ok(CallToolResponse::Task(CreateTaskResult::new(
            self.timing(task),
        )))
    }

    /// `tasks/get`: the task's state, with the call's result once it
    /// ended.
    pub(super) async fn task_get(
        &self,
        request: GetTaskParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let run = self.task_of(&request.task_id, &rq).await?;
        let tool = run.row.tool.clone().unwrap_or_default();
        let created = stamp(run.row.created_at);
        let updated = stamp(run.row.finished_at.unwrap_or(run.row.alive_at));
        let base = |status, message: String| {
            self.timing(
                Task::new(
                    request.task_id.clone(),
                    status,
                    created.clone(),
                    updated.clone(),
                )
                .with_status_message(message),
            )
        };
        let detailed = match run.outcome {
            None => DetailedTask::new(
                base(TaskStatus::Working, format!("{tool} is running")),
                TaskPayload::Working,
            ),
            Some(CallOutcome::Result(result)) => {
                let message = match &result.error {
                    None => format!("{tool} finished"),
                    Some(e) => format!("{tool} failed: {}", e.message),
                };
                let result = match serde_json::to_value(call_result(&result)) {
                    Ok(Value::Object(result)) => result,
                    _ => {
                        return Err(McpError::internal_error(
                            "the task's result cannot be read",
                            None,
                        ));
                    }
                };
                DetailedTask::new(
                    base(TaskStatus::Completed, message),
                    TaskPayload::Completed { result },
                )
            }
            Some(CallOutcome::Stopped) => DetailedTask::new(
                base(TaskStatus::Cancelled, format!("{tool} was stopped")),
                TaskPayload::Cancelled,
            ),
            Some(CallOutcome::Failed { code, message }) => {
                let mut error = serde_json::Map::new();
                error.insert(
                    "code".into(),
                    json!(rmcp::model::ErrorCode::INTERNAL_ERROR.0),
                );
                error.insert("message".into(), json!(message));
                error.insert("data".into(), json!({ "code": code }));
                DetailedTask::new(
                    base(TaskStatus::Failed, message),
                    TaskPayload::Failed { error },
                )
            }
        };
        Ok(GetTaskResult::new(detailed))
    }

    /// `tasks/cancel`: stops the task's call wherever it runs. The answer
    /// does not wait for the stop; `tasks/get` says `cancelled` once it
    /// took effect (or `completed`, had the call ended first).
    pub(super) async fn task_cancel(
        &self,
        request: CancelTaskParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let run = self.task_of(&request.task_id, &rq).await?;
        if run.row.status != RunStatus::Running {
            return Ok(());
        }
        let runs = self.state.runs.clone();
        let run_id = run.row.id;
        tokio::spawn(async move {
            if let Err(e) = runs.stop(run_id).await {
                tracing::warn!(%run_id, error = %e, "a task could not be stopped");
            }
        });
        Ok(())
    }

    /// `tasks/update`: a task here never waits for input (a call that
    /// needs a person's approval is refused, as any call over /mcp), so
    /// there is nothing to answer; the responses are ignored, as the
    /// extension asks of keys that are not outstanding.
    pub(super) async fn task_update(
        &self,
        request: UpdateTaskParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.task_of(&request.task_id, &rq).await?;
        Ok(())
    }

    /// The task `id` names, if it is the caller's: a run that is one tool
    /// call, started by this caller (whoever else may read the run).
    async fn task_of(
        &self,
        id: &str,
        rq: &RequestContext<RoleServer>,
    ) -> Result<CallRun, McpError> {
        let caller = caller_of(rq)?;
        let unknown = || McpError::invalid_params(format!("no task {id:?} of yours"), None);
        let run_id = Uuid::parse_str(id).map_err(|_| unknown())?;
        let run = self
            .state
            .runs
            .call(Scope::User(caller.user_id), run_id)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "a task could not be read");
                McpError::internal_error("the task cannot be read now; try again", None)
            })?
            .filter(|run| run.row.user_id == caller.user_id)
            .ok_or_else(unknown)?;
        Ok(run)
    }

    /// The task's time to live (the runs' retention) and polling interval.
    fn timing(&self, task: Task) -> Task {
        let ttl = u64::try_from(self.state.runs.config().retention.as_millis()).unwrap_or(u64::MAX);
        task.with_ttl_ms(ttl).with_poll_interval_ms(POLL_EVERY_MS)
    }
}

/// A moment as the extension writes it (ISO 8601).
fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
