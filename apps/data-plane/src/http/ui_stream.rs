//! The Vercel AI SDK's UI message stream (protocol v1, docs/ai-sdk.md): a
//! run's events translated into the SDK's chunks, and the SDK's UI messages
//! (what `useChat` sends) read back into the conversation's OpenAI format.
//!
//! A run's event becomes zero or more chunks, each sent as `data: {json}`
//! under the event's id, so a client that resumes after event N gets the
//! chunks of the events after N; the stream ends with `data: [DONE]`.

use std::collections::{BTreeMap, HashSet};
use std::convert::Infallible;

use axum::http::HeaderValue;
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use data_plane_agent::{AgentEvent, FinishReason};
use data_plane_registry::ToolEvent;
use data_plane_runs::{Done, DoneReason, Event, Resumed, RunEvent, to_json};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::sse::HEARTBEAT;

/// The header that marks (and asks for) the stream.
pub const HEADER: &str = "x-vercel-ai-ui-message-stream";

/// Whether a request asks for the UI message stream: the header
/// `x-vercel-ai-ui-message-stream: v1`.
pub fn wanted(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("v1"))
}

/// Turns a run's events, in order, into UI message chunks.
#[derive(Debug, Default)]
pub struct Translator {
    /// The text part being written, if any.
    text: Option<String>,
    texts: u32,
    step_open: bool,
    /// A tool result came since the step began: the next output is the
    /// model's next step (but not a call of this step, run after another).
    after_results: bool,
    /// The calls of the current step.
    step_calls: HashSet<String>,
    /// Leave `messageId` out of `start`: the request continues the
    /// client's last assistant message.
    continuing: bool,
    /// Calls whose arguments began streaming in this step, and their tools.
    inputs_started: BTreeMap<String, String>,
    inputs_available: HashSet<String>,
    denied: HashSet<String>,
    /// Each sub-agent's progress so far, by its parent call.
    subagents: BTreeMap<String, Value>,
}

fn s<'a>(data: &'a Value, key: &str) -> &'a str {
    data.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl Translator {
    /// A translator for a run that continues the client's last assistant
    /// message (`continuing`), or starts a new one.
    pub fn new(continuing: bool) -> Self {
        Translator {
            continuing,
            ..Translator::default()
        }
    }

    /// The chunks one event becomes.
    pub fn push(&mut self, event: &Event) -> Vec<Value> {
        let mut out = Vec::new();
        match event {
            Event::Run {
                run_id,
                conversation_id,
            } => {
                let mut start = json!({
                    "type": "start",
                    "messageMetadata": {
                        "runId": run_id,
                        "conversationId": conversation_id,
                    },
                });
                if !self.continuing {
                    start["messageId"] = json!(run_id);
                }
                out.push(start);
            }
            Event::Agent(event) => self.agent(event, &mut out),
            Event::Done(done) => self.finish(Some(done), &mut out),
            Event::Error { message, .. } => self.fail(message, &mut out),
            Event::Resumed(resumed) => self.resumed(resumed, &mut out),
            // A placeholder the recorder kept for a last event it could not
            // store still ends the message.
            Event::Stored { kind, .. } if kind == "done" => self.finish(None, &mut out),
            Event::Stored { kind, .. } if kind == "error" => self.fail("", &mut out),
            Event::Stored { .. } => {}
        }
        out
    }

    fn agent(&mut self, event: &AgentEvent, out: &mut Vec<Value>) {
        match event {
            AgentEvent::TextDelta { text } => {
                self.step(out, None);
                let id = match &self.text {
                    Some(id) => id.clone(),
                    None => {
                        self.texts += 1;
                        let id = format!("text-{}", self.texts);
                        out.push(json!({"type": "text-start", "id": id}));
                        self.text = Some(id.clone());
                        id
                    }
                };
                out.push(json!({"type": "text-delta", "id": id, "delta": text}));
            }
            AgentEvent::ToolCallDelta {
                call_id,
                name,
                arguments_delta,
                ..
            } => {
                if call_id.is_empty() {
                    return;
                }
                self.step(out, Some(call_id));
                self.close_text(out);
                if self
                    .inputs_started
                    .insert(call_id.clone(), name.clone())
                    .is_none()
                {
                    out.push(json!({
                        "type": "tool-input-start", "toolCallId": call_id,
                        "toolName": name, "dynamic": true,
                    }));
                }
                out.push(json!({
                    "type": "tool-input-delta", "toolCallId": call_id,
                    "inputTextDelta": arguments_delta,
                }));
            }
            AgentEvent::Tool(ToolEvent::ToolCall {
                call_id,
                name,
                arguments,
            }) => {
                if call_id.is_empty() {
                    return;
                }
                self.step(out, Some(call_id));
                self.close_text(out);
                if self.inputs_available.insert(call_id.clone()) {
                    out.push(json!({
                        "type": "tool-input-available", "toolCallId": call_id, "toolName": name,
                        "input": arguments, "dynamic": true,
                    }));
                }
            }
            AgentEvent::Tool(
                event @ (ToolEvent::ApprovalRequest {
                    parent_call_id: Some(_),
                    ..
                }
                | ToolEvent::ApprovalResult {
                    parent_call_id: Some(_),
                    ..
                }),
            ) => out.extend(self.subagent(event)),
            AgentEvent::Tool(ToolEvent::ApprovalRequest { call_id, .. }) => out.push(json!({
                "type": "tool-approval-request",
                "approvalId": call_id,
                "toolCallId": call_id,
            })),
            // Approved: the call's output follows.
            AgentEvent::Tool(ToolEvent::ApprovalResult { approved: true, .. }) => {}
            AgentEvent::Tool(ToolEvent::ApprovalResult { call_id, .. }) => {
                out.push(json!({"type": "tool-output-denied", "toolCallId": call_id}));
                self.denied.insert(call_id.clone());
            }
            AgentEvent::Tool(ToolEvent::ToolResult {
                call_id, result, ..
            }) => {
                self.after_results = true;
                if self.denied.contains(call_id) {
                    return;
                }
                if result.success {
                    out.push(json!({
                        "type": "tool-output-available", "toolCallId": call_id,
                        "output": result.data, "dynamic": true,
                    }));
                } else {
                    let message = result
                        .error
                        .as_ref()
                        .map_or("the tool failed", |e| e.message.as_str());
                    out.push(json!({
                        "type": "tool-output-error", "toolCallId": call_id,
                        "errorText": message, "dynamic": true,
                    }));
                }
            }
            AgentEvent::Tool(
                event @ (ToolEvent::SubagentStart { .. }
                | ToolEvent::SubagentChunk { .. }
                | ToolEvent::SubagentToolCall { .. }
                | ToolEvent::SubagentToolResult { .. }
                | ToolEvent::SubagentEnd { .. }),
            ) => out.extend(self.subagent(event)),
            // A cited passage: a source part (the SDK's `source-document`),
            // numbered as the answer cites it, the span in its metadata.
            AgentEvent::Citation(c) => {
                let title = match c.title.as_deref() {
                    Some(title) if !title.is_empty() => format!("{} — {title}", c.path),
                    _ => c.path.clone(),
                };
                out.push(json!({
                    "type": "source-document",
                    "sourceId": c.index.to_string(),
                    "mediaType": "text/plain",
                    "title": title,
                    "filename": c.path,
                    "providerMetadata": {"dataPlane": {
                        "index": c.index,
                        "documentId": c.document_id,
                        "path": c.path,
                        "charStart": c.char_start,
                        "charEnd": c.char_end,
                        "text": c.text,
                        "tool": c.tool,
                        "callId": c.call_id,
                    }},
                }));
            }
        }
    }

    /// The run ended without an error (`done`; `None` for a placeholder
    /// that says nothing more).
    fn finish(&mut self, done: Option<&Done>, out: &mut Vec<Value>) {
        self.close_text(out);
        self.close_step(out);
        let reason = done.map(|d| d.reason);
        if let Some(reason @ (DoneReason::Stopped | DoneReason::Abandoned)) = reason {
            out.push(json!({"type": "abort", "reason": reason}));
        }
        let finish = match reason {
            Some(DoneReason::Finished(FinishReason::Stop)) => "stop",
            Some(DoneReason::Finished(FinishReason::Length)) => "length",
            _ => "other",
        };
        let metadata = done.map_or_else(|| json!({}), |d| json!(d));
        out.push(json!({
            "type": "finish", "finishReason": finish, "messageMetadata": metadata,
        }));
    }

    /// Another replica took the run over (docs/runs.md, "Takeover"). The
    /// SDK has no chunk that takes text back, so the cut step is closed
    /// where it stands: its text part ends, a call whose arguments were
    /// still streaming ends as an input error (`tool-input-error`, the
    /// SDK's own way to fail a call that never ran), and a transient
    /// `data-resumed` part (`onData`) says which step starts again, for an
    /// app that drops the cut text itself. A reader that attaches later
    /// (the SDK's `resumeStream`) gets a replay without what was cut.
    fn resumed(&mut self, resumed: &Resumed, out: &mut Vec<Value>) {
        self.close_text(out);
        // Only a step asked again was cut while its calls streamed; calls
        // of a step whose calls were running still run.
        let streaming = self
            .inputs_started
            .iter()
            .filter(|(c, _)| resumed.asked_before && !self.inputs_available.contains(*c));
        for (call_id, name) in streaming {
            out.push(json!({
                "type": "tool-input-error", "toolCallId": call_id, "toolName": name,
                "input": null, "dynamic": true,
                "errorText": "cut off when the server running this answer stopped; it was asked again",
            }));
        }
        self.close_step(out);
        out.push(json!({
            "type": "data-resumed", "transient": true,
            "data": {
                "step": resumed.step, "askedBefore": resumed.asked_before, "after": resumed.after,
                "rerun": resumed.rerun, "interrupted": resumed.interrupted,
            },
        }));
        // Calls of the last step still to come (run again, or interrupted)
        // belong to a step of their own; the model's answer to another.
        self.after_results = true;
        self.step_calls
            .retain(|c| resumed.rerun.contains(c) || resumed.interrupted.contains(c));
    }

    fn fail(&mut self, message: &str, out: &mut Vec<Value>) {
        self.close_text(out);
        self.close_step(out);
        out.push(json!({"type": "error", "errorText": message}));
        out.push(json!({"type": "finish", "finishReason": "error"}));
    }

    /// Opens a step when none is open, or the next one when results came
    /// and this output is not a call of the current step (calls that are
    /// not read-only run one after another: A, A's result, B).
    fn step(&mut self, out: &mut Vec<Value>, call: Option<&str>) {
        let of_this_step = call.is_some_and(|c| self.step_calls.contains(c));
        if self.after_results && !of_this_step {
            self.after_results = false;
            self.close_text(out);
            self.close_step(out);
            self.step_calls.clear();
            self.inputs_started.clear();
            self.inputs_available.clear();
        }
        if let Some(call) = call {
            self.step_calls.insert(call.to_string());
        }
        if !self.step_open {
            self.step_open = true;
            out.push(json!({"type": "start-step"}));
        }
    }

    fn close_step(&mut self, out: &mut Vec<Value>) {
        if self.step_open {
            self.step_open = false;
            out.push(json!({"type": "finish-step"}));
        }
    }

    fn close_text(&mut self, out: &mut Vec<Value>) {
        if let Some(id) = self.text.take() {
            out.push(json!({"type": "text-end", "id": id}));
        }
    }

    /// A sub-agent's progress as one data part per parent call, sent whole
    /// each time it changes (the SDK replaces a data part of the same id).
    fn subagent(&mut self, event: &ToolEvent) -> Vec<Value> {
        let parent = match event {
            ToolEvent::SubagentStart { parent_call_id, .. }
            | ToolEvent::SubagentChunk { parent_call_id, .. }
            | ToolEvent::SubagentToolCall { parent_call_id, .. }
            | ToolEvent::SubagentToolResult { parent_call_id, .. }
            | ToolEvent::SubagentEnd { parent_call_id, .. }
            | ToolEvent::ApprovalRequest {
                parent_call_id: Some(parent_call_id),
                ..
            }
            | ToolEvent::ApprovalResult {
                parent_call_id: Some(parent_call_id),
                ..
            } => parent_call_id.clone(),
            _ => return Vec::new(),
        };
        let state = self.subagents.entry(parent.clone()).or_insert_with(
            || json!({"parentCallId": parent, "task": "", "text": "", "calls": [], "done": false}),
        );
        match event {
            ToolEvent::SubagentStart { task, .. } => state["task"] = json!(task),
            ToolEvent::SubagentChunk { text, .. } => {
                let text = format!("{}{text}", s(state, "text"));
                state["text"] = json!(text);
            }
            ToolEvent::SubagentToolCall {
                call_id,
                name,
                arguments,
                ..
            } => {
                if let Some(calls) = state["calls"].as_array_mut() {
                    calls.push(json!({"callId": call_id, "name": name, "arguments": arguments}));
                }
            }
            ToolEvent::SubagentToolResult {
                call_id, result, ..
            } => {
                if let Some(entry) = find_call(state, call_id) {
                    entry["result"] = json!(result);
                }
            }
            ToolEvent::ApprovalRequest { call_id, .. } => {
                if let Some(entry) = find_call(state, call_id) {
                    entry["approval"] = json!("requested");
                }
            }
            ToolEvent::ApprovalResult {
                call_id, status, ..
            } => {
                if let Some(entry) = find_call(state, call_id) {
                    entry["approval"] = json!(status);
                }
            }
            ToolEvent::SubagentEnd { summary, .. } => {
                state["done"] = json!(true);
                state["summary"] = json!(summary);
            }
            ToolEvent::ToolCall { .. } | ToolEvent::ToolResult { .. } => return Vec::new(),
        }
        vec![json!({"type": "data-subagent", "id": parent, "data": state.clone()})]
    }
}

/// The latest entry of a sub-agent's calls with `id`.
fn find_call<'a>(state: &'a mut Value, id: &str) -> Option<&'a mut Value> {
    state["calls"]
        .as_array_mut()
        .and_then(|calls| calls.iter_mut().rev().find(|c| c["callId"] == id))
}

/// A run's events as the UI message stream, the chunks of events numbered
/// `after` or below left out (they are translated all the same: later
/// chunks depend on them). A resumed stream assumes the client kept what
/// it assembled; one that did not replays from 0 (the SDK's default).
/// `continuing`: `start` carries no message id, so the SDK adds to the
/// assistant message it already holds.
pub fn response<S>(events: S, after: i64, continuing: bool) -> Response
where
    S: Stream<Item = RunEvent> + Send + 'static,
{
    let mut translator = Translator::new(continuing);
    let chunks = events
        .flat_map(move |e| {
            let chunks = translator.push(&e.event);
            let last = e.is_last();
            let mut out: Vec<sse::Event> = if e.seq > after {
                chunks
                    .into_iter()
                    .map(|c| {
                        sse::Event::default()
                            .id(e.seq.to_string())
                            .data(to_json(&c))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            if last {
                out.push(sse::Event::default().data("[DONE]"));
            }
            futures::stream::iter(out)
        })
        .map(Ok::<_, Infallible>);
    let mut response = Sse::new(chunks)
        .keep_alive(KeepAlive::new().interval(HEARTBEAT).text("heartbeat"))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(HEADER, HeaderValue::from_static("v1"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert(
        axum::http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    response
}

/// Reads `messages` as the conversation in OpenAI's format: as they are,
/// or, for messages in the SDK's UI shape (`parts` instead of `content`),
/// converted: text parts become the content; an assistant message's tool
/// parts with an output become its `tool_calls`, each followed by the
/// `tool` message the model reads (`{"success", "data"|"error"}`), split
/// into one assistant message per step.
pub fn openai_messages(messages: Vec<Value>) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for (i, message) in messages.into_iter().enumerate() {
        let Some(parts) = message.get("parts") else {
            out.push(message);
            continue;
        };
        let role = s(&message, "role");
        let parts = parts
            .as_array()
            .ok_or_else(|| format!("messages[{i}].parts: not an array"))?;
        match role {
            "user" | "system" => {
                let text: String = parts
                    .iter()
                    .filter(|p| s(p, "type") == "text")
                    .map(|p| s(p, "text"))
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push(json!({"role": role, "content": text}));
            }
            "assistant" => {
                let mut text = String::new();
                let mut calls: Vec<(String, String, Value, Value)> = Vec::new();
                let flush = |text: &mut String,
                             calls: &mut Vec<(String, String, Value, Value)>,
                             out: &mut Vec<Value>| {
                    if text.is_empty() && calls.is_empty() {
                        return;
                    }
                    let mut m = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                    if !calls.is_empty() {
                        m["tool_calls"] = calls
                            .iter()
                            .map(|(id, name, input, _)| {
                                json!({
                                    "id": id, "type": "function",
                                    "function": {"name": name, "arguments": input.to_string()},
                                })
                            })
                            .collect();
                    }
                    out.push(m);
                    for (id, _, _, result) in calls.drain(..) {
                        out.push(json!({"role": "tool", "tool_call_id": id, "content": result.to_string()}));
                    }
                    text.clear();
                };
                for part in parts {
                    let kind = s(part, "type");
                    if kind == "step-start" {
                        flush(&mut text, &mut calls, &mut out);
                    } else if kind == "text" {
                        text.push_str(s(part, "text"));
                    } else if kind == "dynamic-tool" || kind.starts_with("tool-") {
                        let name = if kind == "dynamic-tool" {
                            s(part, "toolName").to_string()
                        } else {
                            kind.trim_start_matches("tool-").to_string()
                        };
                        let result = match s(part, "state") {
                            "output-available" => {
                                json!({"success": true, "data": part.get("output").cloned().unwrap_or(Value::Null)})
                            }
                            "output-error" => {
                                json!({"success": false, "error": {"message": s(part, "errorText")}})
                            }
                            "output-denied" => {
                                json!({"success": false, "error": {"code": "approval_required", "message": "the user denied it"}})
                            }
                            // Not finished: the API wants every call answered.
                            _ => continue,
                        };
                        calls.push((
                            s(part, "toolCallId").to_string(),
                            name,
                            part.get("input").cloned().unwrap_or(json!({})),
                            result,
                        ));
                    }
                }
                flush(&mut text, &mut calls, &mut out);
            }
            other => return Err(format!("messages[{i}].role: {other:?} cannot hold parts")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ui_messages_become_the_openai_conversation_step_by_step() {
        let ui = vec![
            json!({"id": "u", "role": "user", "parts": [{"type": "text", "text": "find"}, {"type": "text", "text": "it"}]}),
            json!({"id": "a", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Looking."},
                {"type": "dynamic-tool", "toolName": "grep_documents", "toolCallId": "c1",
                 "state": "output-available", "input": {"pattern": "x"}, "output": {"matches": 1}},
                {"type": "dynamic-tool", "toolName": "fetch_web_page", "toolCallId": "c2",
                 "state": "output-denied", "input": {"url": "https://example.org/"}},
                {"type": "tool-read_document", "toolCallId": "c3",
                 "state": "output-error", "input": {}, "errorText": "no such document"},
                {"type": "dynamic-tool", "toolName": "web_search", "toolCallId": "c4",
                 "state": "input-available", "input": {}},
                {"type": "data-subagent", "id": "c9", "data": {}},
                {"type": "step-start"},
                {"type": "text", "text": "Found one."},
            ]}),
            json!({"role": "user", "content": "plain OpenAI shape"}),
        ];
        let got = openai_messages(ui).unwrap();
        let roles: Vec<&str> = got.iter().map(|m| s(m, "role")).collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "tool",
                "tool",
                "tool",
                "assistant",
                "user"
            ]
        );
        assert_eq!(got[0]["content"], "find\nit");
        assert_eq!(got[1]["content"], "Looking.");
        let names: Vec<&str> = got[1]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["function"]["name"].as_str().unwrap())
            .collect();
        // The unfinished call is left out: every call sent must be answered.
        assert_eq!(names, ["grep_documents", "fetch_web_page", "read_document"]);
        assert_eq!(
            got[1]["tool_calls"][0]["function"]["arguments"],
            r#"{"pattern":"x"}"#
        );
        assert_eq!(
            got[2]["content"],
            r#"{"data":{"matches":1},"success":true}"#
        );
        assert!(s(&got[3], "content").contains("approval_required"));
        assert!(s(&got[4], "content").contains("no such document"));
        assert_eq!(got[5]["content"], "Found one.");
        assert_eq!(got[6]["content"], "plain OpenAI shape");
        let e = openai_messages(vec![json!({"role": "tool", "parts": []})]).unwrap_err();
        assert_eq!(e, "messages[0].role: \"tool\" cannot hold parts");
    }

    fn run() -> Event {
        Event::Run {
            run_id: uuid::Uuid::nil(),
            conversation_id: uuid::Uuid::max(),
        }
    }

    fn tool(event: ToolEvent) -> Event {
        Event::Agent(AgentEvent::Tool(event))
    }

    fn call(id: &str, name: &str) -> Event {
        tool(ToolEvent::ToolCall {
            call_id: id.into(),
            name: name.into(),
            arguments: json!({}),
        })
    }

    fn partial(id: &str, name: &str) -> Event {
        Event::Agent(AgentEvent::ToolCallDelta {
            call_id: id.into(),
            index: 0,
            name: name.into(),
            arguments_delta: "{".into(),
        })
    }

    fn result(id: &str, success: bool) -> Event {
        let result = if success {
            data_plane_registry::ToolResult::ok("x", id, json!({}), 1)
        } else {
            let error = data_plane_registry::ToolError::new(
                data_plane_registry::ErrorCode::ApprovalRequired,
                "no",
            );
            data_plane_registry::ToolResult::failed("x", id, &error, 1)
        };
        tool(ToolEvent::ToolResult {
            call_id: id.into(),
            name: "x".into(),
            result,
        })
    }

    #[test]
    fn a_denied_call_ends_as_denied_and_a_sub_agent_is_one_data_part() {
        let mut t = Translator::default();
        let mut chunks = Vec::new();
        for event in [
            run(),
            call("c1", "fetch_web_page"),
            tool(ToolEvent::ApprovalRequest {
                call_id: "c1".into(),
                tool: "fetch_web_page".into(),
                arguments: json!({}),
                annotations: json!({}),
                why: "open_world".into(),
                expires_at: String::new(),
                parent_call_id: None,
            }),
            tool(ToolEvent::ApprovalResult {
                call_id: "c1".into(),
                tool: "fetch_web_page".into(),
                approved: false,
                status: "denied".into(),
                remember: false,
                reason: None,
                parent_call_id: None,
            }),
            result("c1", false),
            tool(ToolEvent::SubagentStart {
                parent_call_id: "c2".into(),
                task: "t".into(),
            }),
            tool(ToolEvent::SubagentChunk {
                parent_call_id: "c2".into(),
                text: "a".into(),
            }),
            tool(ToolEvent::SubagentChunk {
                parent_call_id: "c2".into(),
                text: "b".into(),
            }),
            Event::Done(Done {
                reason: DoneReason::Stopped,
                steps: None,
                usage: None,
            }),
        ] {
            chunks.extend(t.push(&event));
        }
        let types: Vec<&str> = chunks.iter().map(|c| s(c, "type")).collect();
        assert_eq!(
            types,
            [
                "start",
                "start-step",
                "tool-input-available",
                "tool-approval-request",
                "tool-output-denied",
                "data-subagent",
                "data-subagent",
                "data-subagent",
                "finish-step",
                "abort",
                "finish"
            ]
        );
        assert_eq!(chunks[7]["data"]["text"], "ab");
        assert_eq!(chunks[7]["id"], "c2");
        assert_eq!(chunks[10]["finishReason"], "other");
    }

    #[test]
    fn calls_of_one_step_run_one_after_another_stay_in_that_step() {
        let mut t = Translator::default();
        let mut chunks = Vec::new();
        for event in [
            partial("a", "x"),
            partial("b", "y"),
            call("a", "x"),
            result("a", true),
            call("b", "y"),
            result("b", true),
            call("c", "x"),
        ] {
            chunks.extend(t.push(&event));
        }
        let types: Vec<&str> = chunks.iter().map(|c| s(c, "type")).collect();
        assert_eq!(
            types,
            [
                "start-step",
                "tool-input-start",
                "tool-input-delta",
                "tool-input-start",
                "tool-input-delta",
                "tool-input-available",
                "tool-output-available",
                "tool-input-available",
                "tool-output-available",
                // c is the model's next step.
                "finish-step",
                "start-step",
                "tool-input-available",
            ]
        );
    }

    #[test]
    fn a_continued_message_keeps_the_clients_id() {
        assert_eq!(
            Translator::new(false).push(&run())[0]["messageId"],
            uuid::Uuid::nil().to_string()
        );
        assert!(
            Translator::new(true).push(&run())[0]
                .get("messageId")
                .is_none()
        );
    }
}
