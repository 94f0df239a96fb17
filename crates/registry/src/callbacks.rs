//! What a tool call reports while it runs: one [`ToolEvent`] type, and the
//! one callback through which every event travels. Each event becomes an
//! event on the client's stream. Beside the events, a call says in
//! [`CallLog`] lines what the pipeline decided (its start, the gate, a
//! retry, its end), for clients that asked to hear them (MCP's logging).

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

/// How much a [`CallLog`] line matters, least first: the syslog levels,
/// as MCP's logging names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// Its name, as MCP and the JSON say it (`debug` … `emergency`).
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    /// The level of that name.
    pub fn named(name: &str) -> Option<LogLevel> {
        LogLevel::ALL.into_iter().find(|level| level.name() == name)
    }
}

/// One line about what happened inside a call: what the pipeline decided,
/// in words the caller may read (nothing an operator's log alone should
/// hold: no addresses, no SQL).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallLog {
    pub level: LogLevel,
    pub call_id: String,
    pub tool: String,
    pub message: String,
    /// The call a sub-agent made this one in, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<String>,
}

/// Receives a call's events, and its log lines where the receiver wants
/// them. None may block: an implementation hands the event on (or drops
/// it) and returns.
pub trait Callbacks: Send + Sync {
    fn emit(&self, event: ToolEvent);

    /// A line about the call; dropped unless the receiver hands logs on.
    fn log(&self, _line: CallLog) {}

    /// False when events and lines are all dropped: the pipeline then
    /// skips building them (a plain JSON call's arguments and result are
    /// not copied into events nobody reads).
    fn takes_reports(&self) -> bool {
        true
    }
}

/// Ignores everything (plain JSON execution).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCallbacks;

impl Callbacks for NoCallbacks {
    fn emit(&self, _event: ToolEvent) {}

    fn takes_reports(&self) -> bool {
        false
    }
}

/// What a call reports: an event, or a log line.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Event(ToolEvent),
    Log(CallLog),
}

/// What a [`ChannelCallbacks`] channel carries: events alone
/// ([`ToolEvent`]), or events and log lines ([`Report`]).
pub trait Reported: Send + 'static {
    fn event(event: ToolEvent) -> Self;
    /// `None`: this channel drops log lines.
    fn log(line: CallLog) -> Option<Self>
    where
        Self: Sized;
}

impl Reported for ToolEvent {
    fn event(event: ToolEvent) -> Self {
        event
    }
    fn log(_line: CallLog) -> Option<Self> {
        None
    }
}

impl Reported for Report {
    fn event(event: ToolEvent) -> Self {
        Report::Event(event)
    }
    fn log(line: CallLog) -> Option<Self> {
        Some(Report::Log(line))
    }
}

/// Forwards every event (and, carrying [`Report`]s, every log line) into an
/// unbounded channel, so a slow reader never holds up the tool; a closed
/// receiver drops them.
#[derive(Debug, Clone)]
pub struct ChannelCallbacks<R = ToolEvent> {
    tx: mpsc::UnboundedSender<R>,
}

impl ChannelCallbacks {
    /// Callbacks whose channel carries the events alone.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<ToolEvent>) {
        Self::channel()
    }
}

impl<R: Reported> ChannelCallbacks<R> {
    /// Callbacks whose channel carries `R`: `ChannelCallbacks::<Report>::channel()`
    /// for the events and the log lines.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<R>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ChannelCallbacks { tx }, rx)
    }
}

impl<R: Reported> Callbacks for ChannelCallbacks<R> {
    fn emit(&self, event: ToolEvent) {
        // The reader went away (client disconnected): nothing to deliver to.
        let _ = self.tx.send(R::event(event));
    }

    fn log(&self, line: CallLog) {
        if let Some(report) = R::log(line) {
            let _ = self.tx.send(report);
        }
    }
}

/// The one event pump: drives `work` (calls that report through the
/// [`ChannelCallbacks`] whose receiver is `events`) and hands each event
/// (or report) to `forward` as it is reported, in order; once `work`
/// returns, what it reported before returning is forwarded too, so nothing
/// is lost or reordered. `forward` answering false (its reader gone) stops
/// at once: `work` is dropped, which cancels what it started, and `None`
/// returned.
///
/// The agent (a batch of calls), executeTool's event stream and MCP's
/// progress and log notifications all run their calls through here
/// ([`crate::Registry::execute_streaming`] for one call).
pub async fn forward_events<T, R, Sent>(
    work: impl Future<Output = T>,
    mut events: mpsc::UnboundedReceiver<R>,
    mut forward: impl FnMut(R) -> Sent,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_levels_are_named_as_their_json_says_and_ordered_least_first() {
        for (i, level) in LogLevel::ALL.into_iter().enumerate() {
            assert_eq!(serde_json::to_value(level).unwrap(), level.name());
            assert_eq!(LogLevel::named(level.name()), Some(level));
            if i > 0 {
                assert!(LogLevel::ALL[i - 1] < level);
            }
        }
        assert_eq!(LogLevel::named("loud"), None);
    }
}
