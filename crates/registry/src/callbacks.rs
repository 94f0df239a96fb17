//! What a tool call reports while it runs: one [`ToolEvent`] type, and the
//! one callback through which every event travels. Each event becomes an
//! event on the client's stream.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::ToolResult;

/// One thing that happened during a tool call, as the stream carries it.
/// Serialises to the event's JSON body, its `type` naming the event
/// ([`ToolEvent::name`]); reads back from it (a run's recorded events).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolEvent {
    ToolCall {
        call_id: String,
        name: String,
        arguments: Value,
    },
    ToolResult {
        call_id: String,
        name: String,
        result: ToolResult,
    },
    SubagentStart {
        parent_call_id: String,
        task: String,
    },
    SubagentChunk {
        parent_call_id: String,
        text: String,
    },
    SubagentToolCall {
        parent_call_id: String,
        call_id: String,
        name: String,
        arguments: Value,
    },
    SubagentToolResult {
        parent_call_id: String,
        call_id: String,
        name: String,
        result: ToolResult,
    },
    SubagentEnd {
        parent_call_id: String,
        summary: String,
    },
    /// The call waits for a person's approval (a chat run's; docs/runs.md).
    ApprovalRequest {
        call_id: String,
        tool: String,
        arguments: Value,
        annotations: Value,
        why: String,
        /// RFC 3339.
        expires_at: String,
        /// The sub-agent's parent call, for a call made inside one.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
    /// How the approval was settled: `approved`, `denied` or `expired`.
    ApprovalResult {
        call_id: String,
        tool: String,
        approved: bool,
        status: String,
        remember: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
}

impl ToolEvent {
    /// The event's name on the wire: its `type` field and its SSE `event:`.
    pub fn name(&self) -> &'static str {
        match self {
            ToolEvent::ToolCall { .. } => "tool_call",
            ToolEvent::ToolResult { .. } => "tool_result",
            ToolEvent::SubagentStart { .. } => "subagent_start",
            ToolEvent::SubagentChunk { .. } => "subagent_chunk",
            ToolEvent::SubagentToolCall { .. } => "subagent_tool_call",
            ToolEvent::SubagentToolResult { .. } => "subagent_tool_result",
            ToolEvent::SubagentEnd { .. } => "subagent_end",
            ToolEvent::ApprovalRequest { .. } => "approval_request",
            ToolEvent::ApprovalResult { .. } => "approval_result",
        }
    }

    /// The same event as a sub-agent started by `parent_call_id` reports it
    /// to its parent: a call or result becomes a sub-agent call or result,
    /// an approval stays one and names the parent. `None` for the sub-agent
    /// events themselves (a sub-agent spawns no sub-agents, so there is
    /// nothing of its own to pass up).
    pub fn in_sub_agent(self, parent_call_id: &str) -> Option<ToolEvent> {
        let parent_call_id = parent_call_id.to_string();
        match self {
            ToolEvent::ToolCall {
                call_id,
                name,
                arguments,
            } => Some(ToolEvent::SubagentToolCall {
                parent_call_id,
                call_id,
                name,
                arguments,
            }),
            ToolEvent::ToolResult {
                call_id,
                name,
                result,
            } => Some(ToolEvent::SubagentToolResult {
                parent_call_id,
                call_id,
                name,
                result,
            }),
            ToolEvent::ApprovalRequest {
                call_id,
                tool,
                arguments,
                annotations,
                why,
                expires_at,
                parent_call_id: own,
            } => Some(ToolEvent::ApprovalRequest {
                call_id,
                tool,
                arguments,
                annotations,
                why,
                expires_at,
                parent_call_id: own.or(Some(parent_call_id)),
            }),
            ToolEvent::ApprovalResult {
                call_id,
                tool,
                approved,
                status,
                remember,
                reason,
                parent_call_id: own,
            } => Some(ToolEvent::ApprovalResult {
                call_id,
                tool,
                approved,
                status,
                remember,
                reason,
                parent_call_id: own.or(Some(parent_call_id)),
            }),
            ToolEvent::SubagentStart { .. }
            | ToolEvent::SubagentChunk { .. }
            | ToolEvent::SubagentToolCall { .. }
            | ToolEvent::SubagentToolResult { .. }
            | ToolEvent::SubagentEnd { .. } => None,
        }
    }
}

/// Receives a call's events. None may block: an implementation hands the
/// event on (or drops it) and returns.
pub trait Callbacks: Send + Sync {
    fn emit(&self, event: ToolEvent);
}

/// Ignores everything (plain JSON execution).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCallbacks;

impl Callbacks for NoCallbacks {
    fn emit(&self, _event: ToolEvent) {}
}

/// Forwards every event into an unbounded channel, so a slow reader never
/// holds up the tool; a closed receiver drops events.
#[derive(Debug, Clone)]
pub struct ChannelCallbacks {
    tx: mpsc::UnboundedSender<ToolEvent>,
}

impl ChannelCallbacks {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<ToolEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ChannelCallbacks { tx }, rx)
    }
}

impl Callbacks for ChannelCallbacks {
    fn emit(&self, event: ToolEvent) {
        // The reader went away (client disconnected): nothing to deliver to.
        let _ = self.tx.send(event);
    }
}

/// The one event pump: drives `work` (calls that report through the
/// [`ChannelCallbacks`] whose receiver is `events`) and hands each event to
/// `forward` as it is reported, in order; once `work` returns, what it
/// reported before returning is forwarded too, so nothing is lost or
/// reordered. `forward` answering false (its reader gone) stops at once:
/// `work` is dropped, which cancels what it started, and `None` returned.
///
/// The agent (a batch of calls), executeTool's event stream and MCP's
/// progress notifications all run their calls through here
/// ([`crate::Registry::execute_streaming`] for one call).
pub async fn forward_events<T, Sent>(
    work: impl Future<Output = T>,
    mut events: mpsc::UnboundedReceiver<ToolEvent>,
    mut forward: impl FnMut(ToolEvent) -> Sent,
) -> Option<T>
where
    Sent: Future<Output = bool>,
{
    let mut work = std::pin::pin!(work);
    let done = loop {
        tokio::select! {
            // Events first: one reported before the work returned goes out
            // before anything the caller does with the result.
            biased;
            Some(event) = events.recv() => {
                if !forward(event).await {
                    return None;
                }
            }
            done = &mut work => break done,
        }
    };
    while let Ok(event) = events.try_recv() {
        if !forward(event).await {
            return None;
        }
    }
    Some(done)
}
