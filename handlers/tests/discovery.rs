//! Tool discovery through the real registry, handlers and PostgreSQL
//! ledger: what is offered up front with and without `tool_search`,
//! search_tools' ranking, describe_tool, execute_tool running and auditing
//! the real tool, the allow-list holding across all three, and tools that
//! defer loading.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::World;
use data_plane_handlers::PgLedger;
use data_plane_registry::{
    ChannelCallbacks, ErrorCode, META_TOOLS, Registry, ToolContext, ToolEvent, ToolResult,
};
use data_plane_store::Scope;
use serde_json::{Value, json};

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// The names search_tools answers for `query`, best first.
async fn found(w: &World, query: &str, ctx: &ToolContext) -> Vec<String> {
    let data = w.ok("search_tools", json!({ "query": query }), ctx).await;
    data["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(t["short_description"].is_string(), "{t}");
            assert!(t["category"].is_string(), "{t}");
            t["name"].as_str().unwrap().to_string()
        })
        .collect()
}

/// `ctx` under agent profile `agent`, asking for discovery.
fn discovering(w: &World, ctx: ToolContext, agent: &str) -> ToolContext {
    let mut ctx = w.registry.with_profile(ctx, agent).unwrap();
    ctx.tool_search = true;
    ctx
}

fn assert_failed(r: &ToolResult, code: ErrorCode, says: &[&str]) {
    assert_eq!(r.code(), Some(code), "{r:?}");
    let message = &r.error.as_ref().unwrap().message;
    for words in says {
        assert!(message.contains(words), "{words:?} not in {message:?}");
    }
}

#[tokio::test]
async fn discovery_offers_the_meta_tools_and_search_ranks_the_allowed_tools() {
    let w = World::new().await;
    // Up front, every profile's list is the three meta-tools and nothing else.
    for agent in ["chat", "explore", "analyze_document", "service"] {
        let ctx = discovering(&w, w.ctx(w.alice, Some(w.alpha)), agent);
        assert_eq!(
            names(&w.registry.get_available_tools(&ctx)),
            META_TOOLS,
            "{agent}"
        );
        let offered = w.registry.offered(&ctx);
        assert!(offered.iter().all(|t| !t.short_description.is_empty()));
    }
    // Without discovery (and no tool deferred) they are neither listed nor answered.
    let plain = w
        .registry
        .with_profile(w.ctx(w.alice, Some(w.alpha)), "chat")
        .unwrap();
    let listed = names(&w.registry.get_available_tools(&plain));
    assert!(listed.contains(&"grep_documents".to_string()));
    assert!(META_TOOLS.iter().all(|m| !listed.contains(&m.to_string())));
    let r = w
        .call("search_tools", json!({ "query": "grep" }), &plain)
        .await;
    assert_failed(
        &r,
        ErrorCode::UnknownTool,
        &["unknown tool \"search_tools\""],
    );

    let chat = discovering(&w, w.ctx(w.alice, Some(w.alpha)), "chat");
    // (query, the tool search_tools puts first)
    let cases = [
        ("find text in files by regular expression", "grep_documents"),
        ("read a web page", "fetch_web_page"),
        ("run SQL over a spreadsheet's tables", "query_documents"),
        ("metadata of a document", "document_info"),
        ("search passages by meaning", "search_documents"),
        ("documents whose name matches a glob", "find_by_name"),
        ("folder hierarchy", "folder_tree"),
        ("grep", "grep_documents"),
    ];
    for (query, first) in cases {
        let tools = found(&w, query, &chat).await;
        assert_eq!(
            tools.first().map(String::as_str),
            Some(first),
            "{query}: {tools:?}"
        );
        assert!(tools.len() <= 5, "{query}: {tools:?}");
    }
    let few = w
        .ok(
            "search_tools",
            json!({ "query": "document", "limit": 2 }),
            &chat,
        )
        .await;
    assert_eq!(few["tools"].as_array().unwrap().len(), 2);

    // The allow-list holds: explore has no grep_documents and no web.
    let explore = discovering(&w, w.ctx(w.alice, Some(w.alpha)), "explore");
    let tools = found(&w, "find text in files by regular expression", &explore).await;
    assert!(!tools.is_empty());
    for hidden in [
        "grep_documents",
        "query_documents",
        "fetch_web_page",
        "web_search",
    ] {
        for query in [hidden, "regular expression grep web page SQL"] {
            let tools = found(&w, query, &explore).await;
            assert!(!tools.contains(&hidden.to_string()), "{query}: {tools:?}");
        }
    }

    // Nothing matches: the note names every tool the context may use.
    let none = w
        .ok("search_tools", json!({ "query": "zzyzx quux" }), &explore)
        .await;
    assert_eq!(none["tools"], json!([]));
    let note = none["note"].as_str().unwrap();
    assert!(note.contains("no tool matches \"zzyzx quux\""), "{note}");
    for tool in [
        "document_info",
        "find_by_name",
        "read_document",
        "search_documents",
    ] {
        assert!(note.contains(tool), "{note}");
    }
    assert!(!note.contains("grep_documents"), "{note}");

    // Arguments are checked against the meta-tool's schema.
    for (args, says) in [
        (json!({}), "\"query\" is a required property"),
        (json!({ "query": "" }), "/query"),
        (json!({ "query": "x", "limit": 0 }), "/limit"),
        (json!({ "query": "x", "limit": 13 }), "/limit"),
        (json!({ "query": "x", "top": 3 }), "top"),
        (json!({ "query": 7 }), "/query"),
    ] {
        let r = w.call("search_tools", args.clone(), &chat).await;
        assert_failed(
            &r,
            ErrorCode::InvalidArguments,
            &["invalid arguments for search_tools", says],
        );
        assert_eq!(r.tool, "search_tools");
    }
}

#[tokio::test]
async fn describe_tool_gives_the_schema_of_allowed_tools_only() {
    let w = World::new().await;
    let chat = discovering(&w, w.ctx(w.alice, Some(w.alpha)), "chat");
    let data = w
        .ok("describe_tool", json!({ "name": "grep_documents" }), &chat)
        .await;
    let entry = w.registry.get("grep_documents").unwrap();
    let definition = entry.definition_for(&chat);
    assert_eq!(data["name"], "grep_documents");
    assert_eq!(data["description"], definition["description"]);
    assert_eq!(data["parameters"], definition["parameters"]);
    assert_eq!(data["category"], "search");
    assert_eq!(data["cost"], json!(entry.meta.cost));
    assert_eq!(data["permission"], json!(entry.meta.permission));
    assert_eq!(data["annotations"]["read_only"], true);
    // An alias names the same tool.
    let by_alias = w
        .ok("describe_tool", json!({ "name": "grep" }), &chat)
        .await;
    assert_eq!(by_alias["name"], "grep_documents");

    // A misspelt name gets close names; a tool outside the profile the
    // same answer as one that does not exist.
    let r = w
        .call("describe_tool", json!({ "name": "grep_document" }), &chat)
        .await;
    assert_failed(
        &r,
        ErrorCode::UnknownTool,
        &["did you mean \"grep_documents\""],
    );
    let explore = discovering(&w, w.ctx(w.alice, Some(w.alpha)), "explore");
    let hidden = w
        .call(
            "describe_tool",
            json!({ "name": "grep_documents" }),
            &explore,
        )
        .await;
    let missing = w
        .call("describe_tool", json!({ "name": "grep_nothing" }), &explore)
        .await;
    assert_failed(
        &hidden,
        ErrorCode::UnknownTool,
        &["unknown tool \"grep_documents\""],
    );
    assert_failed(
        &missing,
        ErrorCode::UnknownTool,
        &["unknown tool \"grep_nothing\""],
    );
    // Suggestions come from the profile's tools; nothing says the tool exists.
    for r in [&hidden, &missing] {
        let message = &r.error.as_ref().unwrap().message;
        assert!(!message.contains("not available"), "{message}");
        assert!(!message.contains("grep_documents\"?"), "{message}");
        assert!(!message.contains("or \"grep_documents"), "{message}");
    }
    let r = w
        .call("describe_tool", json!({ "tool": "grep" }), &chat)
        .await;
    assert_failed(
        &r,
        ErrorCode::InvalidArguments,
        &["\"name\" is a required property"],
    );
}

#[tokio::test]
async fn execute_tool_runs_and_audits_the_real_tool_within_the_allow_list() {
    let w = World::new().await;
    let explore =
        discovering(&w, w.ctx(w.alice, Some(w.alpha)), "explore").with_request_id("req-discovery");
    let call = |id: &str| explore.clone().with_call_id(id);
    let (callbacks, mut events) = ChannelCallbacks::new();
    let arguments = json!({ "query": "vacuum", "mode": "keyword", "limit": 3 });
    let ran = w
        .registry
        .execute_tool(
            "execute_tool",
            json!({ "name": "search", "arguments": arguments }),
            &call("call-run"),
            &callbacks,
        )
        .await;
    assert!(ran.success, "{ran:?}");
    assert_eq!(ran.tool, "search_documents");
    assert_eq!(ran.call_id, "call-run");
    let elsewhere = explore.clone().with_request_id("req-direct");
    let direct = w
        .ok("search_documents", arguments.clone(), &elsewhere)
        .await;
    assert_eq!(ran.data.as_ref().unwrap()["results"], direct["results"]);
    // The stream sees the real tool, under the call's id.
    drop(callbacks);
    let mut seen = Vec::new();
    while let Some(event) = events.recv().await {
        seen.push(match event {
            ToolEvent::ToolCall {
                call_id,
                name,
                arguments,
            } => ("tool_call", call_id, name, arguments),
            ToolEvent::ToolResult {
                call_id,
                name,
                result,
            } => ("tool_result", call_id, name, json!(result.success)),
            other => panic!("unexpected {other:?}"),
        });
    }
    assert_eq!(
        seen,
        [
            (
                "tool_call",
                "call-run".into(),
                "search_documents".into(),
                arguments.clone()
            ),
            (
                "tool_result",
                "call-run".into(),
                "search_documents".into(),
                json!(true)
            ),
        ]
    );

    // Outside the profile: refused as unknown, never run.
    let hidden = w
        .call(
            "execute_tool",
            json!({ "name": "grep_documents", "arguments": { "pattern": "vacuum" } }),
            &call("call-hidden"),
        )
        .await;
    assert_failed(
        &hidden,
        ErrorCode::UnknownTool,
        &["unknown tool \"grep_documents\""],
    );
    // The tool's own checks name the tool.
    let invalid = w
        .call(
            "execute_tool",
            json!({ "name": "read_document", "arguments": { "document_id": "x", "nope": 1 } }),
            &call("call-invalid"),
        )
        .await;
    assert_failed(
        &invalid,
        ErrorCode::InvalidArguments,
        &["invalid arguments for read_document", "nope"],
    );
    // execute_tool's own arguments, and no meta-tool through it.
    let bad = w
        .call(
            "execute_tool",
            json!({ "arguments": {} }),
            &call("call-bad"),
        )
        .await;
    assert_failed(
        &bad,
        ErrorCode::InvalidArguments,
        &[
            "invalid arguments for execute_tool",
            "\"name\" is a required property",
        ],
    );
    let nested = w
        .call(
            "execute_tool",
            json!({ "name": "search_tools", "arguments": { "query": "x" } }),
            &call("call-nested"),
        )
        .await;
    assert_failed(
        &nested,
        ErrorCode::InvalidArguments,
        &["call search_tools directly"],
    );
    let searched = w
        .call(
            "search_tools",
            json!({ "query": "read" }),
            &call("call-search"),
        )
        .await;
    assert!(searched.success);
    w.ledger.flush().await;

    // One audit row per call, under the tool that ran or was asked for,
    // with the tool's own arguments.
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let rows: Vec<(String, String, bool, Option<Value>)> = sqlx::query_as(
        "SELECT call_id, tool, success, args FROM tool_calls
          WHERE request_id = 'req-discovery' ORDER BY call_id",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    let row = |id: &str, tool: &str, success: bool, args: Value| {
        (id.to_string(), tool.to_string(), success, Some(args))
    };
    assert_eq!(
        rows,
        [
            row(
                "call-bad",
                "execute_tool",
                false,
                json!({ "arguments": {} })
            ),
            row(
                "call-hidden",
                "grep_documents",
                false,
                json!({ "pattern": "vacuum" })
            ),
            row(
                "call-invalid",
                "read_document",
                false,
                json!({ "document_id": "x", "nope": 1 })
            ),
            row(
                "call-nested",
                "execute_tool",
                false,
                json!({ "name": "search_tools", "arguments": { "query": "x" } })
            ),
            row("call-run", "search_documents", true, arguments),
            row(
                "call-search",
                "search_tools",
                true,
                json!({ "query": "read" })
            ),
        ]
    );
}

#[tokio::test]
async fn a_deferred_tool_is_left_out_up_front_but_stays_discoverable() {
    let w = World::new().await;
    let handlers = data_plane_handlers::all(Some(&w.deps))
        .into_iter()
        .map(|mut h| {
            h.meta.defer_loading = h.name == "document_info";
            h
        })
        .collect();
    let registry = Registry::build(
        data_plane_handlers::definitions(),
        handlers,
        Arc::new(PgLedger::start(w.test.db.clone())),
    )
    .unwrap();
    let ctx = registry
        .with_profile(w.ctx(w.alice, Some(w.alpha)), "explore")
        .unwrap();
    assert!(!ctx.tool_search);
    assert_eq!(
        names(&registry.get_available_tools(&ctx)),
        [
            "find_by_name",
            "folder_tree",
            "list_folder_contents",
            "list_sources",
            "read_document",
            "search_documents",
            "search_tools",
            "describe_tool",
            "execute_tool",
        ]
    );
    let run = async |name: &str, args: Value| {
        registry
            .execute_tool(name, args, &ctx, &data_plane_registry::NoCallbacks)
            .await
    };
    let search = run("search_tools", json!({ "query": "document metadata" })).await;
    assert_eq!(
        search.data.unwrap()["tools"][0]["name"],
        "document_info",
        "deferred tools are found"
    );
    let described = run("describe_tool", json!({ "name": "document_info" })).await;
    assert!(described.success, "{described:?}");
    let id = w.doc("alpha/guides/vacuum.md");
    let info = run(
        "execute_tool",
        json!({ "name": "document_info", "arguments": { "document_id": id } }),
    )
    .await;
    assert!(info.success, "{info:?}");
    assert_eq!(info.tool, "document_info");
    assert_eq!(info.data.unwrap()["title"], "Routine Vacuuming");

    // An allow-list without the deferred tool lists no meta-tools and
    // does not answer them.
    let reading = w
        .ctx(w.alice, Some(w.alpha))
        .with_allow_list("reading", Arc::from(vec!["read_document".to_string()]));
    assert!(!registry.discovery(&reading));
    assert_eq!(
        names(&registry.get_available_tools(&reading)),
        ["read_document"]
    );
    let r = registry
        .execute_tool(
            "search_tools",
            json!({ "query": "metadata" }),
            &reading,
            &data_plane_registry::NoCallbacks,
        )
        .await;
    assert_eq!(r.code(), Some(ErrorCode::UnknownTool), "{r:?}");
}
