//! A run that is one tool call (an MCP task): the call goes through the
//! registry's whole pipeline as it would in a request, its events are the
//! run's, its result is the run's `tool_result`, and it runs whether anyone
//! reads it or not, until it ends or is stopped (from any replica).

use std::sync::Arc;

use data_plane_agent::{AgentEvent, FinishReason};
use data_plane_registry::{ChannelCallbacks, Registry, ToolContext, forward_events};
use data_plane_store::runs::RunStatus;

use crate::event::{Done, DoneReason, Event};
use crate::live::{LiveRun, finish};
use crate::{Call, Inner};

/// Runs the call under `ctx` (its call id set) to its end and records how
/// the run ended: `done` once the call returned (its result, success or
/// failure, is the `tool_result` before it), or `done` with `stopped` when
/// it was stopped first.
pub(crate) async fn drive(
    inner: Arc<Inner>,
    run: Arc<LiveRun>,
    registry: Arc<Registry>,
    call: Call,
    ctx: ToolContext,
    hold: Box<dyn Send + Sync>,
) {
    let Call { tool, args, ended } = call;
    let (callbacks, events) = ChannelCallbacks::new();
    let work = registry.execute_tool(&tool, args, &ctx, &callbacks);
    let forward = |event| {
        let (inner, run) = (&inner, &run);
        async move { run.emit(inner, Event::Agent(AgentEvent::Tool(event))).await }
    };
    // A stop (or the run's event limit) drops the call, which stops what
    // it started: a sub-agent's model request, a fetch, a module's call. A
    // call that returned as the stop came counts as returned: it ran.
    let returned = tokio::select! {
        biased;
        result = forward_events(work, events, forward) => result,
        () = run.cancel.cancelled() => None,
    };
    drop(callbacks);
    let (status, last) = match returned {
        Some(result) => {
            ended(&result);
            if !result.success {
                tracing::info!(run_id = %run.id, tool, "the task's call failed; its result says why");
            }
            (
                RunStatus::Done,
                Event::Done(Done {
                    reason: DoneReason::Finished(FinishReason::Stop),
                    steps: None,
                    usage: None,
                }),
            )
        }
        None => match run.end_reason() {
            Some(RunStatus::Error) => (
                RunStatus::Error,
                Event::Error {
                    code: "event_limit".into(),
                    message: format!(
                        "the task reached its limit of {} events and was stopped",
                        inner.config.max_events
                    ),
                },
            ),
            _ => (
                RunStatus::Stopped,
                Event::Done(Done {
                    reason: DoneReason::Stopped,
                    steps: None,
                    usage: None,
                }),
            ),
        },
    };
    drop(ctx);
    finish(&inner, &run, last, status, hold).await;
}
