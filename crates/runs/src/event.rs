//! What a run sends, as one type from the agent to the wire: the agent's
//! events and the run's own (its start, how it ended). An event becomes
//! JSON only where it leaves the process: the recorder's row and the
//! streams' encoders, all through [`to_json`]. A recorded event reads back
//! into the same type; one this version cannot read (a placeholder the
//! recorder stored for an event the database refused, or a kind a newer
//! replica wrote) stays as it was stored and is sent on unchanged.

use data_plane_agent::{AgentEvent, FinishReason, Usage};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use uuid::Uuid;

/// One event of a run (docs/events.md).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The run's first event: its id and conversation.
    Run { run_id: Uuid, conversation_id: Uuid },
    /// What the agent reports: text, tool calls and results, approvals,
    /// sub-agents, citations.
    Agent(AgentEvent),
    /// The run's last event when it ended without an error.
    Done(Done),
    /// The run's last event when it failed.
    Error { code: String, message: String },
    /// Another replica took the run over after its own stopped answering
    /// (docs/runs.md, "Takeover"): what it sent after `after` and before
    /// this event did not happen.
    Resumed(Resumed),
    /// A recorded event this version does not read, kept as stored (its
    /// body includes its `type`).
    Stored { kind: String, data: Value },
}

/// A run taken over by another replica, and how it goes on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resumed {
    /// The step whose model request is made again (or for the first time):
    /// the text and call fragments sent of it before are dropped.
    pub step: u32,
    /// The model had been asked for that step already: what it had sent of
    /// its answer (text, call fragments) is among what is dropped.
    #[serde(default)]
    pub asked_before: bool,
    /// Events numbered after this one and before the `resumed` event did
    /// not happen: a reader drops what it holds of them.
    pub after: i64,
    /// Calls that had begun and run again: their start stands; what was
    /// sent of them since (a sub-agent's work) is dropped.
    #[serde(default)]
    pub rerun: Vec<String>,
    /// Calls that had begun and are not run again, since they may have had
    /// an effect: each ends with an `interrupted` result.
    #[serde(default)]
    pub interrupted: Vec<String>,
}

/// Whether the event numbered `seq` is one that a takeover dropped: each
/// of `takeovers` is a `resumed` event's `after` and its own number.
pub(crate) fn dropped(takeovers: &[(i64, i64)], seq: i64) -> bool {
    takeovers
        .iter()
        .any(|&(after, resumed)| seq > after && seq < resumed)
}

/// How a run that did not fail ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Done {
    pub reason: DoneReason,
    /// Model requests made; left out when the run was stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Why a run ended: the agent's reason for an answer, or a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DoneReason {
    /// Someone stopped it.
    Stopped,
    /// Nobody read it for its grace period.
    Abandoned,
    #[serde(untagged)]
    Finished(FinishReason),
}

/// The run's own events, as their JSON says them.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Own {
    Run { run_id: Uuid, conversation_id: Uuid },
    Done(Done),
    Error { code: String, message: String },
    Resumed(Resumed),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OwnRef<'a> {
    Run {
        run_id: &'a Uuid,
        conversation_id: &'a Uuid,
    },
    Done(&'a Done),
    Error {
        code: &'a str,
        message: &'a str,
    },
    Resumed(&'a Resumed),
}

impl Event {
    /// The event's name on the wire: its `type` field and its SSE `event:`.
    pub fn name(&self) -> &str {
        match self {
            Event::Run { .. } => "run",
            Event::Agent(event) => event.name(),
            Event::Done(_) => "done",
            Event::Error { .. } => "error",
            Event::Resumed(_) => "resumed",
            Event::Stored { kind, .. } => kind,
        }
    }

    /// `done` and `error` end a run's stream (a stored one of those names
    /// too, so that a placeholder for the last event still ends it).
    pub fn is_last(&self) -> bool {
        matches!(self.name(), "done" | "error")
    }

    /// A recorded event read back: its `kind` column and JSON body.
    pub fn from_stored(kind: &str, mut data: Value) -> Event {
        if let Value::Object(map) = &mut data
            && !map.contains_key("type")
        {
            map.insert("type".into(), Value::String(kind.into()));
        }
        let typed = match kind {
            "run" | "done" | "error" | "resumed" => Own::deserialize(&data).ok().map(Event::from),
            _ => AgentEvent::deserialize(&data).ok().map(Event::Agent),
        };
        match typed {
            Some(event) if event.name() == kind => event,
            _ => {
                if data.get("unrecorded").is_none() {
                    // A newer replica's event (a new kind, a new error
                    // code): sent on as stored, but a stream that
                    // translates events cannot read it.
                    tracing::warn!(
                        kind,
                        "a recorded event could not be read; it is sent on as stored"
                    );
                }
                Event::Stored {
                    kind: kind.to_string(),
                    data,
                }
            }
        }
    }
}

impl From<Own> for Event {
    fn from(own: Own) -> Self {
        match own {
            Own::Run {
                run_id,
                conversation_id,
            } => Event::Run {
                run_id,
                conversation_id,
            },
            Own::Done(done) => Event::Done(done),
            Own::Error { code, message } => Event::Error { code, message },
            Own::Resumed(resumed) => Event::Resumed(resumed),
        }
    }
}

impl From<AgentEvent> for Event {
    fn from(event: AgentEvent) -> Self {
        Event::Agent(event)
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Event::Run {
                run_id,
                conversation_id,
            } => OwnRef::Run {
                run_id,
                conversation_id,
            }
            .serialize(serializer),
            Event::Agent(event) => event.serialize(serializer),
            Event::Done(done) => OwnRef::Done(done).serialize(serializer),
            Event::Error { code, message } => OwnRef::Error { code, message }.serialize(serializer),
            Event::Resumed(resumed) => OwnRef::Resumed(resumed).serialize(serializer),
            Event::Stored { data, .. } => data.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let data = Value::deserialize(deserializer)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Ok(Event::from_stored(&kind, data))
    }
}

/// `value` as the JSON text that leaves the process (a recorded row, a
/// stream's frame). PostgreSQL's jsonb holds no NUL character, so every NUL
/// in a string or key becomes U+FFFD here, for every reader alike: an event
/// is sent live exactly as it will be replayed from the table.
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> String {
    let text = match serde_json::to_string(value) {
        Ok(text) => text,
        Err(e) => {
            tracing::error!(error = %e, "an event could not be serialised");
            return "{}".to_string();
        }
    };
    if !text.contains("\\u0000") {
        return text;
    }
    without_nul(&text)
}

/// Replaces the `\u0000` escapes of JSON text with U+FFFD, reading escape
/// by escape so that an escaped backslash followed by `u0000` is left alone.
fn without_nul(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let escape = &rest[at..];
        if let Some(after) = escape.strip_prefix("\\u0000") {
            out.push('\u{FFFD}');
            rest = after;
        } else {
            // A backslash and the character it escapes (both ASCII).
            let end = escape.len().min(2);
            out.push_str(&escape[..end]);
            rest = &escape[end..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use data_plane_registry::ToolEvent;
    use serde_json::json;

    fn every_kind() -> Vec<Event> {
        vec![
            Event::Run {
                run_id: Uuid::nil(),
                conversation_id: Uuid::max(),
            },
            AgentEvent::TextDelta { text: "a".into() }.into(),
            Event::Resumed(Resumed {
                step: 2,
                asked_before: true,
                after: 17,
                rerun: vec!["c".into()],
                interrupted: vec!["d".into()],
            }),
            AgentEvent::ToolCallDelta {
                call_id: "c".into(),
                index: 1,
                name: "t".into(),
                arguments_delta: "{".into(),
            }
            .into(),
            AgentEvent::Tool(ToolEvent::ToolCall {
                call_id: "c".into(),
                name: "t".into(),
                arguments: json!({"q": 1}),
            })
            .into(),
            // A result whose data is null keeps it.
            AgentEvent::Tool(ToolEvent::ToolResult {
                call_id: "c".into(),
                name: "t".into(),
                result: data_plane_registry::ToolResult::ok("t", "c", Value::Null, 1),
            })
            .into(),
            AgentEvent::Tool(ToolEvent::SubagentEnd {
                parent_call_id: "c".into(),
                summary: "s".into(),
            })
            .into(),
            Event::Done(Done {
                reason: DoneReason::Finished(FinishReason::StepLimit),
                steps: Some(2),
                usage: Some(Usage {
                    prompt_tokens: 3,
                    completion_tokens: 4,
                }),
            }),
            Event::Done(Done {
                reason: DoneReason::Stopped,
                steps: None,
                usage: None,
            }),
            Event::Error {
                code: "model_error".into(),
                message: "m".into(),
            },
        ]
    }

    #[test]
    fn every_event_reads_back_as_it_was_and_is_named_by_its_type() {
        for event in every_kind() {
            let json: Value = serde_json::from_str(&to_json(&event)).unwrap();
            assert_eq!(json["type"], event.name(), "{json}");
            assert_eq!(Event::from_stored(event.name(), json.clone()), event);
            assert_eq!(serde_json::from_value::<Event>(json).unwrap(), event);
        }
    }

    #[test]
    fn what_this_version_cannot_read_stays_as_it_was_stored() {
        // The recorder's placeholder for a refused last event still ends
        // the stream; a kind from a newer version passes through.
        let placeholder = json!({"type": "done", "unrecorded": "not stored"});
        let event = Event::from_stored("done", placeholder.clone());
        assert!(matches!(&event, Event::Stored { kind, .. } if kind == "done"));
        assert!(event.is_last());
        assert_eq!(serde_json::to_value(&event).unwrap(), placeholder);
        let newer = Event::from_stored("reasoning_delta", json!({"text": "hm"}));
        assert_eq!(newer.name(), "reasoning_delta");
        assert!(!newer.is_last());
        assert_eq!(
            serde_json::to_value(&newer).unwrap(),
            json!({"type": "reasoning_delta", "text": "hm"})
        );
        // A row whose body disagrees with its kind is not trusted as either.
        let odd = Event::from_stored("error", json!({"type": "text_delta", "text": "x"}));
        assert!(matches!(odd, Event::Stored { .. }));
    }

    #[test]
    fn nul_characters_leave_as_replacement_characters_and_nothing_else_changes() {
        let value = json!({
            "text": "a\u{0}b",
            "nested": [{"k\u{0}ey": "\u{0}"}, 3, null],
            "escaped": "a literal \\u0000 and \\\\ and \"quotes\" and é",
        });
        let text = to_json(&value);
        assert!(!text.contains("\\u0000\""), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back,
            json!({
                "text": "a\u{FFFD}b",
                "nested": [{"k\u{FFFD}ey": "\u{FFFD}"}, 3, null],
                "escaped": "a literal \\u0000 and \\\\ and \"quotes\" and é",
            })
        );
        let clean = json!({"text": "no nul \\ here"});
        assert_eq!(to_json(&clean), serde_json::to_string(&clean).unwrap());
    }
}
