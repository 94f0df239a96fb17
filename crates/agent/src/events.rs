//! What a run reports while it goes, and where those reports go: a bounded
//! channel to the client's stream, or a parent agent's callbacks.

use async_trait::async_trait;
use data_plane_registry::{Callbacks, ToolEvent, ToolResult};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

/// One thing that happened in a run. Serialises to the JSON body of the
/// stream's event, its `type` field naming the event (docs/events.md).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// Text for the user, in order.
    TextDelta { text: String },
    /// A fragment of a tool call's arguments while the model streams them;
    /// `partial` is always true. Fragments of one call share its `call_id`
    /// (or, before the model named it, its `index`).
    #[serde(rename = "tool_call")]
    ToolCallDelta {
        call_id: String,
        index: u32,
        name: String,
        arguments_delta: String,
        partial: bool,
    },
    /// The complete call, as it starts running (`partial` false). A retried
    /// call is announced again with the same `call_id`.
    ToolCall {
        call_id: String,
        name: String,
        arguments: Value,
        partial: bool,
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
}

impl From<ToolEvent> for AgentEvent {
    fn from(event: ToolEvent) -> Self {
        match event {
            ToolEvent::ToolCall {
                call_id,
                name,
                arguments,
            } => AgentEvent::ToolCall {
                call_id,
                name,
                arguments,
                partial: false,
            },
            ToolEvent::ToolResult {
                call_id,
                name,
                result,
            } => AgentEvent::ToolResult {
                call_id,
                name,
                result,
            },
            ToolEvent::SubagentStart {
                parent_call_id,
                task,
            } => AgentEvent::SubagentStart {
                parent_call_id,
                task,
            },
            ToolEvent::SubagentChunk {
                parent_call_id,
                text,
            } => AgentEvent::SubagentChunk {
                parent_call_id,
                text,
            },
            ToolEvent::SubagentToolCall {
                parent_call_id,
                call_id,
                name,
                arguments,
            } => AgentEvent::SubagentToolCall {
                parent_call_id,
                call_id,
                name,
                arguments,
            },
            ToolEvent::SubagentToolResult {
                parent_call_id,
                call_id,
                name,
                result,
            } => AgentEvent::SubagentToolResult {
                parent_call_id,
                call_id,
                name,
                result,
            },
            ToolEvent::SubagentEnd {
                parent_call_id,
                summary,
            } => AgentEvent::SubagentEnd {
                parent_call_id,
                summary,
            },
        }
    }
}

/// Where a run's events go.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Delivers one event, waiting while the reader is behind. `false`: no
    /// one reads any more, and the run stops.
    async fn emit(&self, event: AgentEvent) -> bool;
}

/// A bounded channel: a slow client slows its own run only, and a client
/// that went away (receiver dropped) stops it.
#[async_trait]
impl EventSink for mpsc::Sender<AgentEvent> {
    async fn emit(&self, event: AgentEvent) -> bool {
        self.send(event).await.is_ok()
    }
}

/// A nested agent's events, reported through its parent's callbacks under
/// the id of the tool call that started it: text becomes sub-agent chunks,
/// its tool calls and results sub-agent tool calls and results. Argument
/// fragments are not forwarded (the complete call follows), nor is anything
/// the nested agent's own tools report (a sub-agent spawns no sub-agents).
pub struct SubAgentSink<'a> {
    parent: &'a dyn Callbacks,
    parent_call_id: String,
}

impl<'a> SubAgentSink<'a> {
    pub fn new(parent: &'a dyn Callbacks, parent_call_id: impl Into<String>) -> Self {
        SubAgentSink {
            parent,
            parent_call_id: parent_call_id.into(),
        }
    }
}

#[async_trait]
impl EventSink for SubAgentSink<'_> {
    async fn emit(&self, event: AgentEvent) -> bool {
        let parent = &self.parent_call_id;
        match event {
            AgentEvent::TextDelta { text } => self.parent.on_sub_agent_chunk(parent, &text),
            AgentEvent::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => self
                .parent
                .on_sub_agent_tool_call(parent, &call_id, &name, &arguments),
            AgentEvent::ToolResult {
                call_id,
                name,
                result,
            } => self
                .parent
                .on_sub_agent_tool_result(parent, &call_id, &name, &result),
            _ => {}
        }
        true
    }
}
