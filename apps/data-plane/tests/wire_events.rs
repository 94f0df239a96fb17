//! Pins the JSON a client sees for every kind of run event, on both
//! streams a chat run is read as: this server's events (`text/event-stream`,
//! docs/events.md) and the AI SDK's UI message stream (docs/ai-sdk.md).
//! A change to an event's wire form shows here as a changed snapshot, so it
//! is made on purpose or not at all.
//!
//! Each frame's JSON is written with its keys sorted, so the snapshot pins
//! what the JSON says, not the order its fields were serialised in.
// A test fails loudly: an unwrap is its assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::sync::Arc;

use data_plane::http::{sse, ui_stream};
use data_plane_agent::{AgentEvent, Citation, FinishReason, Usage};
use data_plane_registry::{ErrorCode, ToolError, ToolEvent, ToolResult};
use data_plane_runs::{Done, DoneReason, Event, RunEvent, to_json};
use expect_test::expect_file;
use serde_json::{Value, json};

const RUN: &str = "0190a5c2-7c1e-7000-8000-000000000001";
const CONVERSATION: &str = "0190a5c2-7c1e-7000-8000-0000000000c0";

fn ok(call_id: &str, tool: &str, data: Value) -> ToolResult {
    let mut result = ToolResult::ok(tool, call_id, data, 12);
    result.side_effects = vec!["searched:documents".into()];
    result
}

fn failed(call_id: &str, tool: &str, code: ErrorCode, message: &str) -> ToolResult {
    ToolResult::failed(tool, call_id, &ToolError::new(code, message), 3)
}

/// One event of each kind the agent reports, in an order a run could send
/// them: a search with a citation, a call a person denies, a sub-agent
/// whose call a person approves and which is retried.
fn agent_events() -> Vec<AgentEvent> {
    let mut retried = failed(
        "c4",
        "fetch_web_page",
        ErrorCode::Timeout,
        "the page did not answer in time",
    );
    retried.attempts = 2;
    vec![
        AgentEvent::TextDelta {
            text: "Looking it up. ".into(),
        },
        AgentEvent::ToolCallDelta {
            call_id: "c1".into(),
            index: 0,
            name: "search_documents".into(),
            arguments_delta: "{\"query\":".into(),
        },
        AgentEvent::ToolCallDelta {
            call_id: "c1".into(),
            index: 0,
            name: "search_documents".into(),
            arguments_delta: "\"tides\"}".into(),
        },
        ToolEvent::ToolCall {
            call_id: "c1".into(),
            name: "search_documents".into(),
            arguments: json!({"query": "tides"}),
        }
        .into(),
        ToolEvent::ToolResult {
            call_id: "c1".into(),
            name: "search_documents".into(),
            result: ok(
                "c1",
                "search_documents",
                json!({"hits": [{"path": "notes/tides.md", "score": 0.91}]}),
            ),
        }
        .into(),
        AgentEvent::Citation(Citation {
            index: 1,
            document_id: "0190a5c2-7c1e-7000-8000-00000000d0c1".into(),
            path: "notes/tides.md".into(),
            title: Some("Spring tides".into()),
            char_start: 120,
            char_end: 180,
            text: "Spring tides follow the new and the full moon.".into(),
            truncated: false,
            tool: "search_documents".into(),
            call_id: "c1".into(),
        }),
        AgentEvent::TextDelta {
            text: "They follow the moon [1].".into(),
        },
        ToolEvent::ToolCall {
            call_id: "c2".into(),
            name: "fetch_web_page".into(),
            arguments: json!({"url": "https://example.org/tides"}),
        }
        .into(),
        ToolEvent::ApprovalRequest {
            call_id: "c2".into(),
            tool: "fetch_web_page".into(),
            arguments: json!({"url": "https://example.org/tides"}),
            annotations: json!({"readOnlyHint": true, "openWorldHint": true}),
            why: "open_world".into(),
            expires_at: "2026-11-28T12:10:00Z".into(),
            parent_call_id: None,
        }
        .into(),
        ToolEvent::ApprovalResult {
            call_id: "c2".into(),
            tool: "fetch_web_page".into(),
            approved: false,
            status: "denied".into(),
            remember: false,
            reason: Some("not now".into()),
            parent_call_id: None,
        }
        .into(),
        ToolEvent::ToolResult {
            call_id: "c2".into(),
            name: "fetch_web_page".into(),
            result: failed(
                "c2",
                "fetch_web_page",
                ErrorCode::ApprovalRequired,
                "the user denied it",
            ),
        }
        .into(),
        ToolEvent::ToolCall {
            call_id: "c3".into(),
            name: "analyze_document".into(),
            arguments: json!({"path": "notes/tides.md", "task": "summarise"}),
        }
        .into(),
        ToolEvent::SubagentStart {
            parent_call_id: "c3".into(),
            task: "summarise".into(),
        }
        .into(),
        ToolEvent::SubagentChunk {
            parent_call_id: "c3".into(),
            text: "Reading".into(),
        }
        .into(),
        ToolEvent::SubagentToolCall {
            parent_call_id: "c3".into(),
            call_id: "c4".into(),
            name: "fetch_web_page".into(),
            arguments: json!({"url": "https://example.org/moon"}),
        }
        .into(),
        ToolEvent::ApprovalRequest {
            call_id: "c4".into(),
            tool: "fetch_web_page".into(),
            arguments: json!({"url": "https://example.org/moon"}),
            annotations: json!({"openWorldHint": true}),
            why: "open_world".into(),
            expires_at: "2026-11-28T12:10:05Z".into(),
            parent_call_id: Some("c3".into()),
        }
        .into(),
        ToolEvent::ApprovalResult {
            call_id: "c4".into(),
            tool: "fetch_web_page".into(),
            approved: true,
            status: "approved".into(),
            remember: true,
            reason: None,
            parent_call_id: Some("c3".into()),
        }
        .into(),
        ToolEvent::SubagentToolResult {
            parent_call_id: "c3".into(),
            call_id: "c4".into(),
            name: "fetch_web_page".into(),
            result: retried,
        }
        .into(),
        ToolEvent::SubagentEnd {
            parent_call_id: "c3".into(),
            summary: "Tides follow the moon.".into(),
        }
        .into(),
        ToolEvent::ToolResult {
            call_id: "c3".into(),
            name: "analyze_document".into(),
            result: ok(
                "c3",
                "analyze_document",
                json!({"answer": "Tides follow the moon."}),
            ),
        }
        .into(),
        AgentEvent::TextDelta {
            text: " Done.".into(),
        },
    ]
}

fn numbered(seq: i64, event: Event) -> RunEvent {
    RunEvent {
        seq,
        event: Arc::new(event),
    }
}

fn agent(seq: i64, event: &AgentEvent) -> RunEvent {
    numbered(seq, Event::Agent(event.clone()))
}

fn started() -> RunEvent {
    numbered(
        1,
        Event::Run {
            run_id: RUN.parse().unwrap(),
            conversation_id: CONVERSATION.parse().unwrap(),
        },
    )
}

fn done(reason: DoneReason, steps: Option<u32>, usage: Option<(u64, u64)>) -> Event {
    Event::Done(Done {
        reason,
        steps,
        usage: usage.map(|(prompt_tokens, completion_tokens)| Usage {
            prompt_tokens,
            completion_tokens,
        }),
    })
}

/// What the recorder stores in place of an event the database refused.
fn placeholder(seq: i64, kind: &str) -> RunEvent {
    let data = json!({
        "type": kind,
        "unrecorded": "this event could not be stored; it was sent live only",
    });
    numbered(seq, Event::from_stored(kind, data))
}

/// The runs a snapshot is taken of, each a name and its events.
fn runs() -> Vec<(&'static str, Vec<RunEvent>)> {
    let text = |seq| {
        agent(
            seq,
            &AgentEvent::TextDelta {
                text: "Partial".into(),
            },
        )
    };
    let mut every = vec![started()];
    for event in agent_events() {
        every.push(agent(every.len() as i64 + 1, &event));
    }
    let n = every.len() as i64 + 1;
    every.push(numbered(
        n,
        done(
            DoneReason::Finished(FinishReason::Stop),
            Some(3),
            Some((900, 40)),
        ),
    ));
    vec![
        ("every event, ending with an answer", every),
        (
            "a model error",
            vec![
                started(),
                text(2),
                numbered(
                    3,
                    Event::Error {
                        code: "model_error".into(),
                        message: "the language model answered 500".into(),
                    },
                ),
            ],
        ),
        (
            "stopped by the person",
            vec![
                started(),
                text(2),
                numbered(3, done(DoneReason::Stopped, None, None)),
            ],
        ),
        (
            "cut at the step limit",
            vec![
                started(),
                numbered(
                    2,
                    done(
                        DoneReason::Finished(FinishReason::StepLimit),
                        Some(8),
                        Some((1, 2)),
                    ),
                ),
            ],
        ),
        (
            // The server died in step 2, with a call's arguments streaming;
            // another took the run over and asked step 2 again.
            "taken over by another server",
            vec![
                started(),
                text(2),
                agent(
                    3,
                    &AgentEvent::ToolCallDelta {
                        call_id: "call_cut".into(),
                        index: 0,
                        name: "search_documents".into(),
                        arguments_delta: "{\"qu".into(),
                    },
                ),
                numbered(
                    1028,
                    Event::Resumed(data_plane_runs::Resumed {
                        step: 2,
                        asked_before: true,
                        after: 1,
                        rerun: vec![],
                        interrupted: vec![],
                    }),
                ),
                text(1029),
                numbered(
                    1030,
                    done(
                        DoneReason::Finished(FinishReason::Stop),
                        Some(2),
                        Some((10, 5)),
                    ),
                ),
            ],
        ),
        (
            // What the recorder stores in place of an event the database
            // refused, the last one included.
            "rows recorded as placeholders",
            vec![
                started(),
                placeholder(2, "text_delta"),
                placeholder(3, "done"),
            ],
        ),
    ]
}

/// An SSE body as lines: each frame's id, event name and JSON (keys
/// sorted), or its text when it is not JSON.
async fn frames(response: axum::response::Response) -> String {
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = String::from_utf8(body.to_vec()).unwrap();
    let mut out = String::new();
    for frame in body.split("\n\n").filter(|f| !f.trim().is_empty()) {
        let mut parts = Vec::new();
        let mut name = None;
        for line in frame.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "data" => match serde_json::from_str::<Value>(value) {
                    Ok(json) => {
                        // An event's SSE name is its JSON's type.
                        if let Some(name) = name {
                            assert_eq!(json["type"], name, "{frame}");
                        }
                        parts.push(json.to_string());
                    }
                    Err(_) => parts.push(value.to_string()),
                },
                "event" => {
                    name = Some(value);
                    parts.push(format!("event={value}"));
                }
                other => parts.push(format!("{other}={value}")),
            }
        }
        writeln!(out, "{}", parts.join(" ")).unwrap();
    }
    out
}

#[tokio::test]
async fn every_event_keeps_its_wire_form_on_both_streams() {
    let mut snapshot = String::new();
    for (name, events) in runs() {
        writeln!(snapshot, "## {name}\n### events").unwrap();
        let stream = futures::stream::iter(events.clone());
        snapshot.push_str(&frames(sse::run_events(stream)).await);
        writeln!(snapshot, "### ui message stream").unwrap();
        let stream = futures::stream::iter(events.clone());
        snapshot.push_str(&frames(ui_stream::response(stream, 0, false)).await);
        writeln!(snapshot).unwrap();
    }
    // A client resuming after event 6, on a message it continues.
    let (_, every) = runs().remove(0);
    writeln!(
        snapshot,
        "## every event, the UI stream resumed after 6 on a continued message"
    )
    .unwrap();
    let stream = futures::stream::iter(every);
    snapshot.push_str(&frames(ui_stream::response(stream, 6, true)).await);
    expect_file!["snapshots/wire_events.txt"].assert_eq(&snapshot);
}

/// Each event as the table holds it (its name and JSON) and read back.
fn replayed(events: &[RunEvent]) -> Vec<RunEvent> {
    events
        .iter()
        .map(|e| {
            let stored: Value = serde_json::from_str(&to_json(&*e.event)).unwrap();
            numbered(e.seq, Event::from_stored(e.event.name(), stored))
        })
        .collect()
}

#[tokio::test]
async fn a_run_replayed_from_the_table_reads_back_into_the_same_events_and_wire_form() {
    for (name, events) in runs() {
        let again = replayed(&events);
        for (live, stored) in events.iter().zip(&again) {
            assert_eq!(
                live, stored,
                "{name}: event {} changed in the table",
                live.seq
            );
        }
        let live = frames(sse::run_events(futures::stream::iter(events.clone()))).await;
        let back = frames(sse::run_events(futures::stream::iter(again.clone()))).await;
        assert_eq!(live, back, "{name}");
        let live = frames(ui_stream::response(futures::stream::iter(events), 0, false)).await;
        let back = frames(ui_stream::response(futures::stream::iter(again), 0, false)).await;
        assert_eq!(live, back, "{name}");
    }
}
