//! Tool discovery benchmark: what the tool list costs up front against the
//! three discovery meta-tools, and what discovery costs in model steps.
//!
//! For each agent profile, the cl100k_base tokens of the JSON `tools` array
//! the model is sent with every request: the profile's tools as listed up
//! front, then the meta-tools (search_tools, describe_tool, execute_tool)
//! that replace them with `toolSearch`. Then one scripted turn, direct and
//! through discovery, against the fake OpenAI-compatible model: the model
//! requests it takes and the tokens of everything sent (tools and messages,
//! summed over the requests). Offline: the real definitions, metadata and
//! profiles, with every handler replaced by a fixed answer.
// A benchmark fails loudly: there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use data_plane_agent::prompt::PromptTemplate;
use data_plane_agent::testing::{FakeModel, ScriptedCall, text_reply, tool_calls_reply};
use data_plane_agent::{Agent, AgentConfig, AgentEvent, ChatRequest};
use data_plane_registry::{
    Callbacks, NoLedger, Permission, Registry, Settings, ToolContext, ToolError, ToolHandler,
};
use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Every tool's stand-in: the same small answer, so that the two turns
/// differ only in what discovery adds.
struct FixedAnswer;

#[async_trait]
impl ToolHandler for FixedAnswer {
    async fn call(
        &self,
        _args: Value,
        _ctx: &ToolContext,
        _callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        Ok(json!({
            "results": [{
                "path": "guides/vacuum.md",
                "text": "VACUUM reclaims storage occupied by dead tuples.",
                "start": 13,
                "end": 62
            }]
        }))
    }
}

fn registry() -> Arc<Registry> {
    let handlers = data_plane_handlers::all(None)
        .into_iter()
        .map(|mut h| {
            h.handler = Arc::new(FixedAnswer);
            h
        })
        .collect();
    Arc::new(
        Registry::build(
            data_plane_handlers::definitions(),
            handlers,
            Arc::new(NoLedger),
        )
        .unwrap(),
    )
}

/// A user with a space selected and web search switched on: the most any
/// profile offers a hosted model.
fn context(registry: &Registry, profile: &str, tool_search: bool) -> ToolContext {
    let settings = Settings {
        web_search_enabled: true,
        ..Settings::default()
    };
    let ctx = ToolContext::new(Uuid::nil(), Some(Uuid::nil()), Permission::User)
        .with_settings(Arc::new(settings));
    let mut ctx = registry.with_profile(ctx, profile).unwrap();
    ctx.tool_search = tool_search;
    ctx
}

fn tokens(bpe: &CoreBPE, value: &Value) -> usize {
    bpe.encode_with_special_tokens(&value.to_string()).len()
}

/// One scripted turn: the model makes `calls` (name, arguments), one per
/// step, then answers. Returns (model requests, tokens sent).
async fn turn(
    registry: &Arc<Registry>,
    bpe: &CoreBPE,
    ctx: &ToolContext,
    calls: &[(&str, Value)],
) -> (usize, usize) {
    let model = FakeModel::start().await;
    for (i, (name, args)) in calls.iter().enumerate() {
        let id = format!("call_{i}");
        let args = args.to_string();
        model.push(tool_calls_reply(&[ScriptedCall {
            id: &id,
            name,
            fragments: &[&args],
        }]));
    }
    model.push(text_reply(&["VACUUM reclaims the storage of dead tuples."]));
    let mut config = AgentConfig::new(model.base_url(), "bench-model");
    config.api_key = Some("sk-bench".into());
    config.system_prompt = Some(PromptTemplate::default());
    let agent = Agent::new(config, registry.clone()).unwrap();
    let request = ChatRequest {
        messages: vec![
            serde_json::from_value(json!({"role": "user", "content": "What does VACUUM do?"}))
                .unwrap(),
        ],
        ..Default::default()
    };
    let (tx, mut rx) = mpsc::channel::<AgentEvent>(64);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let outcome = agent
        .run(request, ctx, &tx, &CancellationToken::new())
        .await
        .unwrap();
    drop(tx);
    drain.await.unwrap();
    let requests = model.requests();
    assert_eq!(outcome.steps as usize, requests.len());
    let sent = requests
        .iter()
        .map(|r| tokens(bpe, &r["tools"]) + tokens(bpe, &r["messages"]))
        .sum();
    (requests.len(), sent)
}

#[tokio::main]
async fn main() {
    let bpe = tiktoken_rs::cl100k_base().unwrap();
    let registry = registry();

    println!(
        "tools array sent with every model request, cl100k_base tokens (hosted model, a space selected, web search on, a user)"
    );
    println!(
        "{:<18} {:>5} {:>9} {:>10} {:>6}",
        "profile", "tools", "up_front", "discovery", "ratio"
    );
    for profile in registry.profiles().keys() {
        let listed = registry.get_available_tools(&context(&registry, profile, false));
        let meta = registry.get_available_tools(&context(&registry, profile, true));
        let (up_front, discovery) = (tokens(&bpe, &json!(listed)), tokens(&bpe, &json!(meta)));
        println!(
            "{profile:<18} {:>5} {up_front:>9} {discovery:>10} {:>5.1}x",
            listed.len(),
            up_front as f64 / discovery as f64
        );
    }

    let query = json!({ "query": "VACUUM", "limit": 5 });
    let search = json!({ "query": "search passages by meaning" });
    let describe = json!({ "name": "search_documents" });
    let execute = json!({ "name": "search_documents", "arguments": query });
    let direct_ctx = context(&registry, "chat", false);
    let discovery_ctx = context(&registry, "chat", true);
    let turns = [
        (
            "direct: search_documents, answer",
            &direct_ctx,
            vec![("search_documents", query.clone())],
        ),
        (
            "discovery: search_tools, describe_tool, execute_tool, answer",
            &discovery_ctx,
            vec![
                ("search_tools", search.clone()),
                ("describe_tool", describe),
                ("execute_tool", execute.clone()),
            ],
        ),
        (
            "discovery: search_tools, execute_tool, answer",
            &discovery_ctx,
            vec![("search_tools", search), ("execute_tool", execute)],
        ),
    ];
    println!();
    println!(
        "one scripted turn, chat profile, fake model: model requests, and tokens sent (tools + messages, summed over the requests)"
    );
    let mut direct_steps = 0;
    for (name, ctx, calls) in turns {
        let (steps, sent) = turn(&registry, &bpe, ctx, &calls).await;
        if direct_steps == 0 {
            direct_steps = steps;
        }
        println!(
            "{name:<62} {steps} requests ({} more) {sent:>6} tokens",
            steps - direct_steps
        );
    }
}
