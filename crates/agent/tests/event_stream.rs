//! The chat stream's wire format, pinned: one run whose tool starts a
//! nested agent, every event serialised as the binary writes it on the
//! stream (`event:` the type, `data:` the JSON), with durations redacted.

// Tests report failure by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use data_plane_agent::testing::{
    FakeModel, Reply, ScriptedCall, chunk, text_reply, tool_calls_reply,
};
use data_plane_agent::{Agent, AgentConfig, AgentEvent, ChatRequest, SubAgentSink};
use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, DefinitionFile, HandlerEntry, NoLedger,
    Permission, RateLimits, Registry, ToolContext, ToolError, ToolEvent, ToolHandler, ToolMeta,
};
use expect_test::expect;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Looks a key up.
struct Lookup;

#[async_trait]
impl ToolHandler for Lookup {
    async fn call(
        &self,
        args: Value,
        _ctx: &ToolContext,
        _callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        Ok(json!({ "value": format!("value of {}", args["key"].as_str().unwrap()) }))
    }
}

/// Answers through a nested agent that may only look keys up, as
/// analyze_document does.
struct Analyse {
    base_url: String,
    registry: Arc<OnceLock<Arc<Registry>>>,
}

#[async_trait]
impl ToolHandler for Analyse {
    async fn call(
        &self,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        let parent_call_id = ctx.call_id.clone().unwrap();
        callbacks.emit(ToolEvent::SubagentStart {
            parent_call_id: parent_call_id.clone(),
            task: format!("analyse {}", args["key"]),
        });
        let agent =
            Agent::new(config(&self.base_url), self.registry.get().unwrap().clone()).unwrap();
        let mut nested = ToolContext::new(ctx.user_id, None, Permission::User);
        nested.parent_call_id = Some(parent_call_id.clone());
        nested.allow_list = Some(Arc::from(vec!["lookup".to_string()]));
        let sink = SubAgentSink::new(callbacks, parent_call_id.clone());
        let outcome = agent
            .run(
                request("look it up"),
                &nested,
                &sink,
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        callbacks.emit(ToolEvent::SubagentEnd {
            parent_call_id,
            summary: format!("finished in {} steps", outcome.steps),
        });
        Ok(json!({ "analysis": outcome.text }))
    }
}

fn config(base_url: &str) -> AgentConfig {
    let mut config = AgentConfig::new(base_url.to_string(), "test-model");
    config.api_key = Some("sk-test".into());
    config
}

fn request(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![serde_json::from_value(json!({"role": "user", "content": text})).unwrap()],
        ..Default::default()
    }
}

fn entry(name: &'static str, handler: Arc<dyn ToolHandler>) -> HandlerEntry {
    HandlerEntry {
        name,
        file: "tests/event_stream.rs",
        meta: ToolMeta {
            category: Category::Search,
            short_description: "test tool",
            available_when: "always",
            aliases: &[],
            annotations: AnnotationHints::DERIVED,
            cost: CostTier::Cheap,
            permission: Permission::User,
            timeout: Duration::from_secs(10),
            limits: RateLimits::NONE,
            requires_gate: false,
            defer_loading: false,
            tag: None,
        },
        available: |_| true,
        shape: None,
        asks: None,
        handler,
        args_schema: json!({}),
        output_schema: None,
    }
}

fn definition(name: &str) -> DefinitionFile {
    DefinitionFile {
        file: format!("{name}.json"),
        text: json!({
            "name": name,
            "description": format!("test tool {name}"),
            "parameters": {
                "type": "object",
                "properties": { "key": { "type": "string", "description": "what to look at" } },
                "required": ["key"],
                "additionalProperties": false
            }
        })
        .to_string(),
    }
}

/// The events as the stream carries them (the binary writes each event's
/// JSON value as its `data:` line, the `type` as its `event:` line), with
/// every `duration_ms` redacted.
fn wire(events: &[AgentEvent]) -> String {
    let mut out = String::new();
    for event in events {
        let mut data = serde_json::to_value(event).unwrap();
        if let Some(ms) = data.pointer_mut("/result/duration_ms") {
            *ms = json!("[ms]");
        }
        let kind = data["type"].as_str().unwrap().to_string();
        out.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
    }
    out
}

#[tokio::test]
async fn the_chat_stream_keeps_its_wire_format() {
    let model = FakeModel::start().await;
    let slot = Arc::new(OnceLock::new());
    let handlers = vec![
        entry(
            "analyse",
            Arc::new(Analyse {
                base_url: model.base_url(),
                registry: slot.clone(),
            }),
        ),
        entry("lookup", Arc::new(Lookup)),
    ];
    let definitions = vec![definition("analyse"), definition("lookup")];
    let registry = Arc::new(Registry::build(definitions, handlers, Arc::new(NoLedger)).unwrap());
    slot.set(registry.clone()).unwrap();

    // The model says a word, then calls analyse; the nested agent looks a
    // key up and answers; the model then answers the user.
    let Reply::Stream(mut call) = tool_calls_reply(&[ScriptedCall {
        id: "call_outer",
        name: "analyse",
        fragments: &["{\"key\":", " \"alpha\"}"],
    }]) else {
        unreachable!()
    };
    call.insert(
        0,
        data_plane_agent::testing::Piece::Chunk(chunk(
            json!({ "role": "assistant", "content": "Let me look. " }),
            None,
        )),
    );
    model.push(Reply::Stream(call));
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_inner",
        name: "lookup",
        fragments: &["{\"key\": \"alpha\"}"],
    }]));
    model.push(text_reply(&["alpha is ", "one"]));
    model.push(text_reply(&["It is one."]));

    let (tx, mut rx) = mpsc::channel(64);
    let agent = Agent::new(config(&model.base_url()), registry).unwrap();
    let ctx = ToolContext::new(uuid::Uuid::new_v4(), None, Permission::User);
    agent
        .run(
            request("what is alpha?"),
            &ctx,
            &tx,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    drop(tx);
    let mut events = Vec::new();
    while let Some(event) = rx.recv().await {
        events.push(event);
    }

    expect![[r#"
        event: text_delta
        data: {"text":"Let me look.","type":"text_delta"}

        event: tool_call
        data: {"arguments_delta":"{\"key\":","call_id":"call_outer","index":0,"name":"analyse","partial":true,"type":"tool_call"}

        event: tool_call
        data: {"arguments_delta":" \"alpha\"}","call_id":"call_outer","index":0,"name":"analyse","partial":true,"type":"tool_call"}

        event: tool_call
        data: {"arguments":{"key":"alpha"},"call_id":"call_outer","name":"analyse","partial":false,"type":"tool_call"}

        event: subagent_start
        data: {"parent_call_id":"call_outer","task":"analyse \"alpha\"","type":"subagent_start"}

        event: subagent_tool_call
        data: {"arguments":{"key":"alpha"},"call_id":"call_inner","name":"lookup","parent_call_id":"call_outer","type":"subagent_tool_call"}

        event: subagent_tool_result
        data: {"call_id":"call_inner","name":"lookup","parent_call_id":"call_outer","result":{"call_id":"call_inner","data":{"value":"value of alpha"},"duration_ms":"[ms]","success":true,"tool":"lookup"},"type":"subagent_tool_result"}

        event: subagent_chunk
        data: {"parent_call_id":"call_outer","text":"alpha is","type":"subagent_chunk"}

        event: subagent_chunk
        data: {"parent_call_id":"call_outer","text":" one","type":"subagent_chunk"}

        event: subagent_end
        data: {"parent_call_id":"call_outer","summary":"finished in 2 steps","type":"subagent_end"}

        event: tool_result
        data: {"call_id":"call_outer","name":"analyse","result":{"call_id":"call_outer","data":{"analysis":"alpha is one"},"duration_ms":"[ms]","success":true,"tool":"analyse"},"type":"tool_result"}

        event: text_delta
        data: {"text":"It is one.","type":"text_delta"}

    "#]]
    .assert_eq(&wire(&events));
}
