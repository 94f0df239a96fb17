//! The seven callbacks through which a tool call reports progress. Each one
//! becomes an event on the client's stream.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::ToolResult;

/// One thing that happened during a tool call, as the stream carries it.
#[derive(Debug, Clone, Serialize, PartialEq)]
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
}

/// Receives progress. Every method defaults to doing nothing; none may block.
pub trait Callbacks: Send + Sync {
    fn on_tool_call(&self, _call_id: &str, _name: &str, _arguments: &Value) {}
    fn on_tool_result(&self, _call_id: &str, _name: &str, _result: &ToolResult) {}
    fn on_sub_agent_start(&self, _parent_call_id: &str, _task: &str) {}
    fn on_sub_agent_chunk(&self, _parent_call_id: &str, _text: &str) {}
    fn on_sub_agent_tool_call(
        &self,
        _parent_call_id: &str,
        _call_id: &str,
        _name: &str,
        _arguments: &Value,
    ) {
    }
    fn on_sub_agent_tool_result(
        &self,
        _parent_call_id: &str,
        _call_id: &str,
        _name: &str,
        _result: &ToolResult,
    ) {
    }
    fn on_sub_agent_end(&self, _parent_call_id: &str, _summary: &str) {}
}

/// Ignores everything (plain JSON execution).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCallbacks;

impl Callbacks for NoCallbacks {}

/// Forwards every callback as a [`ToolEvent`] into an unbounded channel, so a
/// slow reader never holds up the tool; a closed receiver drops events.
#[derive(Debug, Clone)]
pub struct ChannelCallbacks {
    tx: mpsc::UnboundedSender<ToolEvent>,
}

impl ChannelCallbacks {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<ToolEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ChannelCallbacks { tx }, rx)
    }

    fn send(&self, event: ToolEvent) {
        // The reader went away (client disconnected): nothing to deliver to.
        let _ = self.tx.send(event);
    }
}

impl Callbacks for ChannelCallbacks {
    fn on_tool_call(&self, call_id: &str, name: &str, arguments: &Value) {
        self.send(ToolEvent::ToolCall {
            call_id: call_id.into(),
            name: name.into(),
            arguments: arguments.clone(),
        });
    }
    fn on_tool_result(&self, call_id: &str, name: &str, result: &ToolResult) {
        self.send(ToolEvent::ToolResult {
            call_id: call_id.into(),
            name: name.into(),
            result: result.clone(),
        });
    }
    fn on_sub_agent_start(&self, parent_call_id: &str, task: &str) {
        self.send(ToolEvent::SubagentStart {
            parent_call_id: parent_call_id.into(),
            task: task.into(),
        });
    }
    fn on_sub_agent_chunk(&self, parent_call_id: &str, text: &str) {
        self.send(ToolEvent::SubagentChunk {
            parent_call_id: parent_call_id.into(),
            text: text.into(),
        });
    }
    fn on_sub_agent_tool_call(
        &self,
        parent_call_id: &str,
        call_id: &str,
        name: &str,
        arguments: &Value,
    ) {
        self.send(ToolEvent::SubagentToolCall {
            parent_call_id: parent_call_id.into(),
            call_id: call_id.into(),
            name: name.into(),
            arguments: arguments.clone(),
        });
    }
    fn on_sub_agent_tool_result(
        &self,
        parent_call_id: &str,
        call_id: &str,
        name: &str,
        result: &ToolResult,
    ) {
        self.send(ToolEvent::SubagentToolResult {
            parent_call_id: parent_call_id.into(),
            call_id: call_id.into(),
            name: name.into(),
            result: result.clone(),
        });
    }
    fn on_sub_agent_end(&self, parent_call_id: &str, summary: &str) {
        self.send(ToolEvent::SubagentEnd {
            parent_call_id: parent_call_id.into(),
            summary: summary.into(),
        });
    }
}
