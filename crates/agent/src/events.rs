//! What a run reports while it goes, and where those reports go: a bounded
//! channel to the client's stream, or a parent agent's callbacks.

use async_trait::async_trait;
use data_plane_registry::{CallLog, Callbacks, ToolEvent};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::citations::Citation;
use crate::resume::Checkpoint;

/// One thing that happened in a run: the model's own output as it streams,
/// or an event of a tool call it made. Serialises to the JSON body of the
/// stream's event, its `type` field naming the event (docs/events.md), and
/// reads back from it.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// Text for the user, in order.
    TextDelta { text: String },
    /// A fragment of a tool call's arguments while the model streams them,
    /// sent as a `tool_call` event with `partial` true. Fragments of one call
    /// share its `call_id` (or, before the model named it, its `index`).
    ToolCallDelta {
        call_id: String,
        index: u32,
        name: String,
        arguments_delta: String,
    },
    /// What the registry reports about a call: the complete call as it
    /// starts running (`partial` false on the stream; once per call, a
    /// retry staying inside it), its result, and what a sub-agent it
    /// started does.
    Tool(ToolEvent),
    /// The answer cited a passage a tool returned, for the first time
    /// (docs/events.md, `citation`).
    Citation(Citation),
}

impl AgentEvent {
    /// The event's name on the wire: its `type` field and its SSE `event:`.
    pub fn name(&self) -> &'static str {
        match self {
            AgentEvent::TextDelta { .. } => "text_delta",
            AgentEvent::ToolCallDelta { .. } => "tool_call",
            AgentEvent::Tool(event) => event.name(),
            AgentEvent::Citation(_) => "citation",
        }
    }
}

impl From<ToolEvent> for AgentEvent {
    fn from(event: ToolEvent) -> Self {
        AgentEvent::Tool(event)
    }
}

/// The stream's shape for the events the agent adds to the registry's: a
/// `tool_call` says whether it is a fragment (`partial`), the registry's
/// own `tool_call` (used by streams of a single tool) does not.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire<'a> {
    TextDelta {
        text: &'a str,
    },
    #[serde(rename = "tool_call")]
    ToolCallDelta {
        call_id: &'a str,
        index: u32,
        name: &'a str,
        arguments_delta: &'a str,
        partial: bool,
    },
    ToolCall {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a Value,
        partial: bool,
    },
    Citation(&'a Citation),
}

impl Serialize for AgentEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AgentEvent::TextDelta { text } => Wire::TextDelta { text }.serialize(serializer),
            AgentEvent::ToolCallDelta {
                call_id,
                index,
                name,
                arguments_delta,
            } => Wire::ToolCallDelta {
                call_id,
                index: *index,
                name,
                arguments_delta,
                partial: true,
            }
            .serialize(serializer),
            AgentEvent::Tool(ToolEvent::ToolCall {
                call_id,
                name,
                arguments,
            }) => Wire::ToolCall {
                call_id,
                name,
                arguments,
                partial: false,
            }
            .serialize(serializer),
            AgentEvent::Tool(event) => event.serialize(serializer),
            AgentEvent::Citation(citation) => Wire::Citation(citation).serialize(serializer),
        }
    }
}

/// What the agent adds to the registry's events, read back: a `tool_call`
/// with `partial` true is a fragment, without it the complete call.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Incoming {
    TextDelta {
        text: String,
    },
    ToolCall {
        call_id: String,
        #[serde(default)]
        index: u32,
        name: String,
        #[serde(default)]
        arguments_delta: String,
        #[serde(default)]
        arguments: Value,
        #[serde(default)]
        partial: bool,
    },
    Citation(Citation),
}

impl<'de> Deserialize<'de> for AgentEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let ours = matches!(
            value.get("type").and_then(Value::as_str),
            Some("text_delta" | "tool_call" | "citation")
        );
        if !ours {
            return ToolEvent::deserialize(&value)
                .map(AgentEvent::Tool)
                .map_err(D::Error::custom);
        }
        Ok(
            match Incoming::deserialize(&value).map_err(D::Error::custom)? {
                Incoming::TextDelta { text } => AgentEvent::TextDelta { text },
                Incoming::ToolCall {
                    call_id,
                    index,
                    name,
                    arguments_delta,
                    partial: true,
                    ..
                } => AgentEvent::ToolCallDelta {
                    call_id,
                    index,
                    name,
                    arguments_delta,
                },
                Incoming::ToolCall {
                    call_id,
                    name,
                    arguments,
                    ..
                } => AgentEvent::Tool(ToolEvent::ToolCall {
                    call_id,
                    name,
                    arguments,
                }),
                Incoming::Citation(citation) => AgentEvent::Citation(citation),
            },
        )
    }
}

/// Where a run's events go.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Delivers one event, waiting while the reader is behind. `false`: no
    /// one reads any more, and the run stops.
    async fn emit(&self, event: AgentEvent) -> bool;

    /// Records where the run stands (docs/runs.md, "Takeover"); a sink
    /// that keeps nothing for another server to continue from ignores it.
    /// `false`: no one reads any more, and the run stops.
    async fn checkpoint(&self, _at: &Checkpoint) -> bool {
        true
    }

    /// A line about one of the run's tool calls (`Callbacks::log`);
    /// dropped unless the sink hands logs on (a sub-agent's, to its
    /// parent call).
    fn log(&self, _line: CallLog) {}
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
/// its tool events become sub-agent events ([`ToolEvent::in_sub_agent`]).
/// Argument fragments are not forwarded (the complete call follows).
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
        let event = match event {
            AgentEvent::TextDelta { text } => Some(ToolEvent::SubagentChunk {
                parent_call_id: self.parent_call_id.clone(),
                text,
            }),
            // A sub-agent's answer is its parent's tool result: the
            // parent's own answer cites.
            AgentEvent::ToolCallDelta { .. } | AgentEvent::Citation(_) => None,
            AgentEvent::Tool(event) => event.in_sub_agent(&self.parent_call_id),
        };
        if let Some(event) = event {
            self.parent.emit(event);
        }
        true
    }

    fn log(&self, line: CallLog) {
        self.parent.log(line);
    }
}
