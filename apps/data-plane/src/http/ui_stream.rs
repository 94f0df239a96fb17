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
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use data_plane_runs::RunEvent;
use futures::{Stream, StreamExt};
use serde_json::{Map, Value, json};

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
    inputs_started: HashSet<String>,
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
    pub fn push(&mut self, kind: &str, data: &Value) -> Vec<Value> {
        let mut out = Vec::new();
        match kind {
            "run" => {
                let mut start = json!({
                    "type": "start",
                    "messageMetadata": {
                        "runId": s(data, "run_id"),
                        "conversationId": s(data, "conversation_id"),
                    },
                });
                if !self.continuing {
                    start["messageId"] = json!(s(data, "run_id"));
                }
                out.push(start);
            }
            "text_delta" => {
                self.step(&mut out, None);
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
                out.push(json!({"type": "text-delta", "id": id, "delta": s(data, "text")}));
            }
            "tool_call" => {
                let call = s(data, "call_id").to_string();
                let name = s(data, "name");
                if call.is_empty() {
                    return out;
                }
                self.step(&mut out, Some(&call));
                self.close_text(&mut out);
                if data.get("partial") == Some(&Value::Bool(true)) {
                    if self.inputs_started.insert(call.clone()) {
                        out.push(json!({
                            "type": "tool-input-start", "toolCallId": call,
                            "toolName": name, "dynamic": true,
                        }));
                    }
                    out.push(json!({
                        "type": "tool-input-delta", "toolCallId": call,
                        "inputTextDelta": s(data, "arguments_delta"),
                    }));
                } else if self.inputs_available.insert(call.clone()) {
                    out.push(json!({
                        "type": "tool-input-available", "toolCallId": call, "toolName": name,
                        "input": data.get("arguments").cloned().unwrap_or(json!({})),
                        "dynamic": true,
                    }));
                }
            }
            "approval_request" | "approval_result" if data.get("parent_call_id").is_some() => {
                out.extend(self.subagent(kind, data));
            }
            "approval_request" => out.push(json!({
                "type": "tool-approval-request",
                "approvalId": s(data, "call_id"),
                "toolCallId": s(data, "call_id"),
            })),
            // Approved: the call's output follows.
            "approval_result" if data.get("approved") != Some(&Value::Bool(true)) => {
                let call = s(data, "call_id").to_string();
                out.push(json!({"type": "tool-output-denied", "toolCallId": call}));
                self.denied.insert(call);
            }
            "tool_result" => {
                self.after_results = true;
                let call = s(data, "call_id");
                if self.denied.contains(call) {
                    return out;
                }
                let result = data.get("result").cloned().unwrap_or(Value::Null);
                if result.get("success") == Some(&Value::Bool(true)) {
                    out.push(json!({
                        "type": "tool-output-available", "toolCallId": call,
                        "output": result.get("data").cloned().unwrap_or(Value::Null),
                        "dynamic": true,
                    }));
                } else {
                    let message = result
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("the tool failed");
                    out.push(json!({
                        "type": "tool-output-error", "toolCallId": call,
                        "errorText": message, "dynamic": true,
                    }));
                }
            }
            k if k.starts_with("subagent_") => out.extend(self.subagent(kind, data)),
            // A cited passage: a source part (the SDK's `source-document`),
            // numbered as the answer cites it, the span in its metadata.
            "citation" => {
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                let path = s(data, "path");
                let title = match data.get("title").and_then(Value::as_str) {
                    Some(title) if !title.is_empty() => format!("{path} — {title}"),
                    _ => path.to_string(),
                };
                out.push(json!({
                    "type": "source-document",
                    "sourceId": index.to_string(),
                    "mediaType": "text/plain",
                    "title": title,
                    "filename": path,
                    "providerMetadata": {"dataPlane": {
                        "index": index,
                        "documentId": s(data, "document_id"),
                        "path": path,
                        "charStart": data.get("char_start"),
                        "charEnd": data.get("char_end"),
                        "text": s(data, "text"),
                        "tool": s(data, "tool"),
                        "callId": s(data, "call_id"),
                    }},
                }));
            }
            "done" => {
                self.close_text(&mut out);
                self.close_step(&mut out);
                let reason = s(data, "reason");
                if reason == "stopped" || reason == "abandoned" {
                    out.push(json!({"type": "abort", "reason": reason}));
                }
                let finish = match reason {
                    "stop" => "stop",
                    "length" => "length",
                    _ => "other",
                };
                let mut metadata = Map::new();
                for key in ["reason", "steps", "usage"] {
                    if let Some(v) = data.get(key) {
                        metadata.insert(key.into(), v.clone());
                    }
                }
                out.push(json!({
                    "type": "finish", "finishReason": finish, "messageMetadata": metadata,
                }));
            }
            "error" => {
                self.close_text(&mut out);
                self.close_step(&mut out);
                out.push(json!({"type": "error", "errorText": s(data, "message")}));
                out.push(json!({"type": "finish", "finishReason": "error"}));
            }
            _ => {}
        }
        out
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
    fn subagent(&mut self, kind: &str, data: &Value) -> Vec<Value> {
        let parent = s(data, "parent_call_id").to_string();
        let state = self.subagents.entry(parent.clone()).or_insert_with(
            || json!({"parentCallId": parent, "task": "", "text": "", "calls": [], "done": false}),
        );
        match kind {
            "subagent_start" => state["task"] = json!(s(data, "task")),
            "subagent_chunk" => {
                let text = format!("{}{}", s(state, "text"), s(data, "text"));
                state["text"] = json!(text);
            }
            "subagent_tool_call" => {
                if let Some(calls) = state["calls"].as_array_mut() {
                    calls.push(json!({
                        "callId": s(data, "call_id"),
                        "name": s(data, "name"),
                        "arguments": data.get("arguments").cloned().unwrap_or(Value::Null),
                    }));
                }
            }
            "subagent_tool_result" | "approval_request" | "approval_result" => {
                let id = s(data, "call_id");
                let entry = state["calls"]
                    .as_array_mut()
                    .and_then(|calls| calls.iter_mut().rev().find(|c| c["callId"] == id));
                if let Some(entry) = entry {
                    match kind {
                        "subagent_tool_result" => entry["result"] = data["result"].clone(),
                        "approval_request" => entry["approval"] = json!("requested"),
                        _ => entry["approval"] = data["status"].clone(),
                    }
                }
            }
            "subagent_end" => {
                state["done"] = json!(true);
                state["summary"] = json!(s(data, "summary"));
            }
            _ => return Vec::new(),
        }
        vec![json!({"type": "data-subagent", "id": parent, "data": state.clone()})]
    }
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
            let chunks = translator.push(&e.kind, &e.data);
            let last = e.is_last();
            let mut out: Vec<Event> = if e.seq > after {
                chunks
                    .into_iter()
                    .map(|c| Event::default().id(e.seq.to_string()).data(c.to_string()))
                    .collect()
            } else {
                Vec::new()
            };
            if last {
                out.push(Event::default().data("[DONE]"));
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

    #[test]
    fn a_denied_call_ends_as_denied_and_a_sub_agent_is_one_data_part() {
        let mut t = Translator::default();
        let mut chunks = Vec::new();
        for (kind, data) in [
            ("run", json!({"run_id": "r", "conversation_id": "c"})),
            (
                "tool_call",
                json!({"call_id": "c1", "name": "fetch_web_page", "arguments": {"url": "u"}, "partial": false}),
            ),
            (
                "approval_request",
                json!({"call_id": "c1", "tool": "fetch_web_page"}),
            ),
            (
                "approval_result",
                json!({"call_id": "c1", "approved": false, "status": "denied"}),
            ),
            (
                "tool_result",
                json!({"call_id": "c1", "result": {"success": false, "error": {"message": "no"}}}),
            ),
            (
                "subagent_start",
                json!({"parent_call_id": "c2", "task": "t"}),
            ),
            (
                "subagent_chunk",
                json!({"parent_call_id": "c2", "text": "a"}),
            ),
            (
                "subagent_chunk",
                json!({"parent_call_id": "c2", "text": "b"}),
            ),
            ("done", json!({"reason": "stopped"})),
        ] {
            chunks.extend(t.push(kind, &data));
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
        let result = json!({"success": true, "data": {}});
        for (kind, data) in [
            (
                "tool_call",
                json!({"call_id": "a", "name": "x", "arguments_delta": "{", "partial": true}),
            ),
            (
                "tool_call",
                json!({"call_id": "b", "name": "y", "arguments_delta": "{", "partial": true}),
            ),
            (
                "tool_call",
                json!({"call_id": "a", "name": "x", "arguments": {}, "partial": false}),
            ),
            ("tool_result", json!({"call_id": "a", "result": result})),
            (
                "tool_call",
                json!({"call_id": "b", "name": "y", "arguments": {}, "partial": false}),
            ),
            ("tool_result", json!({"call_id": "b", "result": result})),
            (
                "tool_call",
                json!({"call_id": "c", "name": "x", "arguments": {}, "partial": false}),
            ),
        ] {
            chunks.extend(t.push(kind, &data));
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
        let run = json!({"run_id": "r", "conversation_id": "c"});
        assert_eq!(
            Translator::new(false).push("run", &run)[0]["messageId"],
            "r"
        );
        assert!(
            Translator::new(true).push("run", &run)[0]
                .get("messageId")
                .is_none()
        );
    }
}
