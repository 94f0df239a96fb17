//! analyze_document end to end through the registry, the real PostgreSQL and
//! a fake OpenAI-compatible model on 127.0.0.1 that streams scripted replies:
//! the sub-agent's events and their parent call id, the tools it is offered,
//! its confinement to one document, its step limit, cancellation, the
//! profile's discovery default, and the answer without a model.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::World;
use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{
    FakeModel, Piece, Reply, ScriptedCall, text_reply, tool_calls_reply,
};
use data_plane_handlers::{ModelSettings, SubAgentLimits};
use data_plane_registry::{
    ChannelCallbacks, ErrorCode, META_TOOLS, NoLedger, Registry, ToolContext, ToolEvent, ToolResult,
};
use data_plane_store::Scope;
use serde_json::{Value, json};

const VACUUM: &str = "alpha/guides/vacuum.md";
const PARENT: &str = "call_parent_1";

fn settings(fake: &FakeModel, max_steps: u32, token_budget: u64) -> ModelSettings {
    ModelSettings {
        agent: AgentConfig::new(fake.base_url(), "test-model"),
        sub_agent: SubAgentLimits {
            max_steps,
            token_budget,
        },
    }
}

async fn connected(max_steps: u32) -> (World, FakeModel) {
    connected_with(max_steps, 100_000).await
}

async fn connected_with(max_steps: u32, token_budget: u64) -> (World, FakeModel) {
    let w = World::new().await;
    let fake = FakeModel::start().await;
    let settings = settings(&fake, max_steps, token_budget);
    assert!(w.deps.connect_model(settings, &w.registry));
    (w, fake)
}

/// Runs analyze_document through the registry as the parent call `PARENT`
/// and returns its result and every event its callbacks reported, in order.
async fn analyze(w: &World, ctx: &ToolContext, args: Value) -> (ToolResult, Vec<ToolEvent>) {
    let (callbacks, mut rx) = ChannelCallbacks::new();
    let ctx = ctx.clone().with_call_id(PARENT);
    let result = w
        .registry
        .execute_tool("analyze_document", args, &ctx, &callbacks)
        .await;
    drop(callbacks);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    (result, events)
}

fn parent_of(e: &ToolEvent) -> Option<&str> {
    match e {
        ToolEvent::SubagentStart { parent_call_id, .. }
        | ToolEvent::SubagentChunk { parent_call_id, .. }
        | ToolEvent::SubagentToolCall { parent_call_id, .. }
        | ToolEvent::SubagentToolResult { parent_call_id, .. }
        | ToolEvent::SubagentEnd { parent_call_id, .. } => Some(parent_call_id),
        _ => None,
    }
}

/// The sub-agent's tool results, by tool name, in order.
fn sub_results(events: &[ToolEvent]) -> Vec<(String, ToolResult)> {
    events
        .iter()
        .filter_map(|e| match e {
            ToolEvent::SubagentToolResult { name, result, .. } => {
                Some((name.clone(), result.clone()))
            }
            _ => None,
        })
        .collect()
}

fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_sub_agent_reads_its_document_and_its_answer_is_the_result() {
    let (w, fake) = connected(6).await;
    let doc = w.doc(VACUUM);
    let read_args = format!(r#"{{"document_id":"{doc}","max_length":120}}"#);
    fake.push(tool_calls_reply(&[ScriptedCall {
        id: "call_read_1",
        name: "read_document",
        fragments: &[&read_args[..10], &read_args[10..]],
    }]));
    fake.push(text_reply(&[
        "Vacuuming reclaims ",
        "the space of dead tuples.",
    ]));
    let alice = w.ctx(w.alice, Some(w.alpha));
    let (result, events) = analyze(
        &w,
        &alice,
        json!({ "document_id": doc, "question": "What does vacuuming reclaim?" }),
    )
    .await;

    assert!(result.success, "{:?}", result.error);
    let data = result.data.clone().unwrap();
    assert_eq!(
        data["analysis"],
        "Vacuuming reclaims the space of dead tuples."
    );
    assert_eq!(data["finish_reason"], "stop");
    assert_eq!(data["steps"], 2);
    // tool_calls_reply reports 40 + 12 tokens, text_reply 20 + one per part.
    assert_eq!(data["total_tokens"], 40 + 12 + 20 + 2);
    assert!(data.get("note").is_none());

    let kinds: Vec<&str> = events.iter().map(ToolEvent::name).collect();
    assert_eq!(
        kinds,
        [
            "tool_call",
            "subagent_start",
            "subagent_tool_call",
            "subagent_tool_result",
            "subagent_chunk",
            "subagent_chunk",
            "subagent_end",
            "tool_result",
        ]
    );
    for e in &events[1..events.len() - 1] {
        assert_eq!(parent_of(e), Some(PARENT), "{e:?}");
    }
    let ToolEvent::SubagentStart { task, .. } = &events[1] else {
        unreachable!()
    };
    assert!(
        task.contains("Routine Vacuuming") && task.contains("What does vacuuming reclaim?"),
        "{task}"
    );
    let ToolEvent::SubagentToolCall {
        call_id,
        name,
        arguments,
        ..
    } = &events[2]
    else {
        unreachable!()
    };
    assert_eq!(
        (call_id.as_str(), name.as_str()),
        ("call_read_1", "read_document")
    );
    assert_eq!(arguments["max_length"], 120);
    let (_, read) = &sub_results(&events)[0];
    assert!(read.success, "{read:?}");
    assert!(
        read.data.as_ref().unwrap()["text"]
            .as_str()
            .unwrap()
            .starts_with("# Routine Vacuuming")
    );
    let ToolEvent::SubagentEnd { summary, .. } = &events[6] else {
        unreachable!()
    };
    assert!(summary.contains("2 steps"), "{summary}");

    // What the sub-agent was offered and told.
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let mut offered = offered_tools(&requests[0]);
    offered.sort();
    assert_eq!(
        offered,
        [
            "document_info",
            "grep_documents",
            "query_documents",
            "read_document",
            "search_documents"
        ]
    );
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert_eq!(requests[0]["messages"][0]["role"], "system");
    assert!(
        system.contains(&doc.to_string()) && system.contains("Routine Vacuuming"),
        "{system}"
    );
    assert!(system.contains("at most 6 steps"), "{system}");
    assert_eq!(
        requests[0]["messages"][1]["content"],
        "What does vacuuming reclaim?"
    );
    let tool_message = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool_message["tool_call_id"], "call_read_1");
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("Routine Vacuuming")
    );

    // The audit log ties the sub-agent's call to its parent.
    w.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let parents: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT tool, parent_call_id FROM tool_calls ORDER BY ts, tool")
            .fetch_all(&mut *tx)
            .await
            .unwrap();
    assert!(
        parents.contains(&("read_document".into(), Some(PARENT.into()))),
        "{parents:?}"
    );
    assert!(
        parents.contains(&("analyze_document".into(), None)),
        "{parents:?}"
    );
}

#[tokio::test]
async fn the_sub_agent_cannot_leave_its_document() {
    let (w, fake) = connected(6).await;
    let doc = w.doc(VACUUM);
    let other = w.doc("alpha/guides/indexes.md");
    let secret = w.doc("beta/plans/zanzibar.md");
    let escape = [
        (
            "call_a",
            "read_document",
            format!(r#"{{"document_id":"{other}"}}"#),
        ),
        (
            "call_b",
            "document_info",
            format!(r#"{{"document_id":"{secret}"}}"#),
        ),
        (
            "call_c",
            "grep_documents",
            format!(r#"{{"pattern":"index","document_id":"{other}"}}"#),
        ),
        // Without a document_id, grep is pinned to the analysed document.
        (
            "call_d",
            "grep_documents",
            r#"{"pattern":"PostgreSQL"}"#.to_string(),
        ),
        (
            "call_e",
            "analyze_document",
            format!(r#"{{"document_id":"{doc}","question":"again"}}"#),
        ),
        (
            "call_f",
            "fetch_web_page",
            r#"{"url":"http://127.0.0.1:9/"}"#.to_string(),
        ),
        (
            "call_g",
            "find_by_name",
            r#"{"pattern":"*.md"}"#.to_string(),
        ),
    ];
    let fragments: Vec<[&str; 1]> = escape.iter().map(|(_, _, a)| [a.as_str()]).collect();
    let calls: Vec<ScriptedCall<'_>> = escape
        .iter()
        .zip(&fragments)
        .map(|((id, name, _), fragments)| ScriptedCall {
            id,
            name,
            fragments,
        })
        .collect();
    fake.push(tool_calls_reply(&calls));
    fake.push(text_reply(&["Only the vacuum guide was readable."]));
    let alice = w.ctx(w.alice, Some(w.alpha));
    let (result, events) = analyze(
        &w,
        &alice,
        json!({ "document_id": doc, "question": "Compare with the other guides." }),
    )
    .await;
    assert!(result.success, "{:?}", result.error);

    let results = sub_results(&events);
    let by_name = |name: &str| -> Vec<&ToolResult> {
        results
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, r)| r)
            .collect()
    };
    // (tool, index among its calls, code, words in the message)
    let refused = [
        (
            "read_document",
            0,
            ErrorCode::PermissionDenied,
            other.to_string(),
        ),
        (
            "document_info",
            0,
            ErrorCode::PermissionDenied,
            secret.to_string(),
        ),
        (
            "grep_documents",
            0,
            ErrorCode::PermissionDenied,
            "out of reach".to_string(),
        ),
        (
            "analyze_document",
            0,
            ErrorCode::NotAvailable,
            "may not use it".to_string(),
        ),
        (
            "fetch_web_page",
            0,
            ErrorCode::NotAvailable,
            "may not use it".to_string(),
        ),
        (
            "find_by_name",
            0,
            ErrorCode::NotAvailable,
            "may not use it".to_string(),
        ),
    ];
    for (tool, i, code, words) in refused {
        let r = by_name(tool)[i];
        assert_eq!(r.code(), Some(code), "{tool}: {r:?}");
        assert!(
            r.error.as_ref().unwrap().message.contains(&words),
            "{tool}: {r:?}"
        );
    }
    let grep = by_name("grep_documents")[1];
    assert!(grep.success, "{grep:?}");
    let matches = grep.data.as_ref().unwrap()["results"]
        .as_array()
        .unwrap()
        .clone();
    assert!(!matches.is_empty());
    assert_eq!(grep.data.as_ref().unwrap()["documents_searched"], 1);
    for m in &matches {
        assert_eq!(m["document_id"], json!(doc), "{m}");
    }
    // Nothing from beta reached the model.
    let fed_back = fake.requests()[1].to_string();
    assert!(!fed_back.contains("Zanzibar") && !fed_back.contains("Confidential"));
}

#[tokio::test]
async fn the_step_limit_ends_the_sub_agent() {
    let (w, fake) = connected(2).await;
    let doc = w.doc(VACUUM);
    let args = format!(r#"{{"document_id":"{doc}","start":0,"max_length":50}}"#);
    for id in ["call_1", "call_2", "call_3"] {
        fake.push(tool_calls_reply(&[ScriptedCall {
            id,
            name: "read_document",
            fragments: &[args.as_str()],
        }]));
    }
    let alice = w.ctx(w.alice, Some(w.alpha));
    let (result, events) = analyze(
        &w,
        &alice,
        json!({ "document_id": doc, "question": "Read it all." }),
    )
    .await;
    assert_eq!(
        result.code(),
        Some(ErrorCode::InvalidArguments),
        "{result:?}"
    );
    let message = &result.error.as_ref().unwrap().message;
    assert!(
        message.contains("all 2 of its steps") && message.contains("narrower"),
        "{message}"
    );
    // Two model requests, and only the first step's call ran.
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(sub_results(&events).len(), 1);
    let ToolEvent::SubagentEnd { summary, .. } = events.iter().rev().nth(1).unwrap() else {
        panic!("{events:?}")
    };
    assert!(summary.contains("steps"), "{summary}");
}

#[tokio::test]
async fn a_step_limited_analysis_with_text_is_returned_with_a_note() {
    let (w, fake) = connected(1).await;
    let doc = w.doc(VACUUM);
    let call = json!({ "tool_calls": [{ "index": 0, "id": "call_x", "type": "function",
        "function": { "name": "read_document", "arguments": format!(r#"{{"document_id":"{doc}"}}"#) } }] });
    fake.push(Reply::Stream(vec![
        Piece::Chunk(data_plane_agent::testing::chunk(
            json!({ "role": "assistant", "content": "So far: it is about vacuuming." }),
            None,
        )),
        Piece::Chunk(data_plane_agent::testing::chunk(call, None)),
        Piece::Chunk(data_plane_agent::testing::chunk(
            json!({}),
            Some("tool_calls"),
        )),
        Piece::Done,
    ]));
    let alice = w.ctx(w.alice, Some(w.alpha));
    let (result, _) = analyze(
        &w,
        &alice,
        json!({ "document_id": doc, "question": "Summarise." }),
    )
    .await;
    assert!(result.success, "{result:?}");
    let data = result.data.unwrap();
    assert_eq!(data["finish_reason"], "step_limit");
    assert_eq!(data["analysis"], "So far: it is about vacuuming.");
    assert!(
        data["note"].as_str().unwrap().contains("may be incomplete"),
        "{data}"
    );
}

#[tokio::test]
async fn dropping_the_parent_call_stops_the_sub_agent() {
    let (w, fake) = connected(4).await;
    fake.push(Reply::Stream(vec![
        Piece::Chunk(data_plane_agent::testing::chunk(
            json!({ "role": "assistant", "content": "Reading" }),
            None,
        )),
        Piece::Hang,
    ]));
    let doc = w.doc(VACUUM);
    let alice = w.ctx(w.alice, Some(w.alpha));
    let registry = w.registry.clone();
    let call = tokio::spawn(async move {
        let (callbacks, _rx) = ChannelCallbacks::new();
        registry
            .execute_tool(
                "analyze_document",
                json!({ "document_id": doc, "question": "Summarise." }),
                &alice,
                &callbacks,
            )
            .await
    });
    assert!(fake.wait_requests(1, Duration::from_secs(10)).await);
    call.abort();
    assert!(
        fake.wait_dropped(1, Duration::from_secs(10)).await,
        "the model request outlived the dropped call"
    );
}

#[tokio::test]
async fn without_a_model_the_document_is_checked_then_refused() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let check = |result: ToolResult, code: ErrorCode, words: &str| {
        assert_eq!(result.code(), Some(code), "{result:?}");
        let message = result.error.unwrap().message;
        assert!(message.contains(words), "{message}");
    };
    let (r, events) = analyze(
        &w,
        &alice,
        json!({ "document_id": w.doc(VACUUM), "question": "What is it about?" }),
    )
    .await;
    check(r, ErrorCode::NotAvailable, "DATA_PLANE_MODEL");
    assert!(events.iter().all(|e| parent_of(e).is_none()), "{events:?}");
    let (r, _) = analyze(
        &w,
        &alice,
        json!({ "document_id": w.doc("beta/plans/zanzibar.md"), "question": "What is it about?" }),
    )
    .await;
    check(r, ErrorCode::NotFound, "no document");
}

#[tokio::test]
async fn the_token_budget_ends_the_sub_agent() {
    // One step reports 40 + 12 tokens: past a budget of 50, so its call is not run.
    let (w, fake) = connected_with(6, 50).await;
    let doc = w.doc(VACUUM);
    let args = format!(r#"{{"document_id":"{doc}"}}"#);
    fake.push(tool_calls_reply(&[ScriptedCall {
        id: "call_1",
        name: "read_document",
        fragments: &[args.as_str()],
    }]));
    let alice = w.ctx(w.alice, Some(w.alpha));
    let (result, events) = analyze(
        &w,
        &alice,
        json!({ "document_id": doc, "question": "Summarise." }),
    )
    .await;
    let message = &result.error.as_ref().expect("an error").message;
    assert!(
        message.contains("budget of 50 tokens (52 used)"),
        "{message}"
    );
    assert_eq!(fake.requests().len(), 1);
    assert!(sub_results(&events).is_empty(), "{events:?}");
}

#[tokio::test]
async fn a_profile_that_asks_for_discovery_gives_the_sub_agent_the_meta_tools() {
    let w = World::new().await;
    // The shipped profile, with discovery switched on.
    let definitions = data_plane_handlers::definitions()
        .into_iter()
        .map(|mut d| {
            if d.file == "definitions/agents/analyze_document.json" {
                let mut profile: Value = serde_json::from_str(&d.text).unwrap();
                profile["tool_search"] = json!(true);
                d.text = profile.to_string();
            }
            d
        })
        .collect();
    let registry = Arc::new(
        Registry::build(
            definitions,
            data_plane_handlers::all(Some(&w.deps)),
            Arc::new(NoLedger),
        )
        .unwrap(),
    );
    let fake = FakeModel::start().await;
    assert!(w.deps.connect_model(settings(&fake, 4, 100_000), &registry));
    let run = json!({ "name": "read_document", "arguments": { "max_length": 40 } }).to_string();
    fake.push(tool_calls_reply(&[ScriptedCall {
        id: "call_run_1",
        name: "execute_tool",
        fragments: &[&run],
    }]));
    fake.push(text_reply(&["It is about VACUUM."]));

    let doc = w.doc(VACUUM);
    let (callbacks, mut rx) = ChannelCallbacks::new();
    let ctx = w.ctx(w.alice, Some(w.alpha)).with_call_id(PARENT);
    let result = registry
        .execute_tool(
            "analyze_document",
            json!({ "document_id": doc, "question": "what is it about?" }),
            &ctx,
            &callbacks,
        )
        .await;
    drop(callbacks);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    assert!(result.success, "{result:?}");
    assert_eq!(offered_tools(&fake.requests()[0]), META_TOOLS);
    // The tool ran under its own name, pinned to the document.
    let results = sub_results(&events);
    assert_eq!(results.len(), 1, "{results:?}");
    let (name, read) = &results[0];
    assert_eq!(name, "read_document");
    assert!(read.success, "{read:?}");
    assert_eq!(read.data.as_ref().unwrap()["document_id"], json!(doc));
}
