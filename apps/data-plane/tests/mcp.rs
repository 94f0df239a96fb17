//! `/mcp` driven by the official MCP Python SDK (the `mcp` package from
//! PyPI, installed by `make setup` into .data/mcp/venv; tests/mcp/client.py)
//! against a real server on 127.0.0.1 with PostgreSQL and a fake model:
//! refusal without a token, initialize, the tool list with titles and
//! annotations, a call, a call with bad arguments (an `isError` result),
//! analyze_document's sub-agent as progress notifications, a cancelled
//! call whose sub-agent's model request is closed, and the space's
//! documents as resources, the prompts and a completion; and, with
//! JSON-RPC written by hand, documents as resources (listed, read, and
//! never across spaces) and the refusal of browser origins not allowed.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use data_plane_agent::testing::tool_calls_reply;
use data_plane_agent::testing::{FakeModel, Piece, Reply, ScriptedCall, chunk, text_reply};
use serde_json::{Value, json};

#[tokio::test]
async fn the_mcp_python_sdk_lists_calls_follows_progress_and_cancels() {
    // analyze_document's sub-agent: reads, answers; then, for the call the
    // client cancels, starts an answer it never finishes.
    let model = FakeModel::start().await;
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_read",
        name: "read_document",
        fragments: &["{\"max_length\": 200}"],
    }]));
    model.push(text_reply(&["It reclaims ", "dead tuples."]));
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(
            json!({"role": "assistant", "content": "Thinking"}),
            None,
        )),
        Piece::Hang,
    ]));
    // The analysis the 2026-07-28 connection runs as a task.
    model.push(text_reply(&["A task's answer."]));
    let server = common::guide_server("mcp@example.com", model.base_url(), false).await;
    let (base, token, space, doc) = (&server.base, &server.token, server.space, server.doc);

    // Without a token: 401 with the challenge the protocol asks for.
    let r = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer"),
        "{:?}",
        r.headers()
    );

    let (space, doc) = (space.to_string(), doc.to_string());
    let got = common::mcp_script(
        "client.py",
        &[
            ("DATA_PLANE_URL", base),
            ("USER_TOKEN", token),
            ("SPACE_ID", &space),
            ("DOCUMENT_ID", &doc),
        ],
    )
    .await;

    // Refused without a token (the 401 itself is checked above; the SDK
    // reports it as an error response).
    assert_eq!(got["refused"]["connected"], false, "{got:#}");
    assert!(
        got["refused"]["error"]
            .as_str()
            .unwrap()
            .contains("MCPError"),
        "{:#}",
        got["refused"]
    );

    // The handshake.
    assert_eq!(got["initialize"]["server"], "data-plane");
    let version = got["initialize"]["protocolVersion"].as_str().unwrap();
    assert!(
        version >= "2025-06-18",
        "an old protocol version: {version}"
    );
    assert_eq!(got["initialize"]["tools"], true);

    // The list: the registry's tools in the space, titled and annotated.
    let tools = got["tools"].as_array().unwrap();
    let tool = |name: &str| -> &Value {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {tools:#?}"))
    };
    let search = tool("search_documents");
    assert_eq!(search["title"], "Search documents");
    assert_eq!(search["inputSchema"]["type"], "object");
    assert!(search["inputSchema"]["properties"]["query"].is_object());
    assert_eq!(
        search["annotations"],
        json!({
            "title": "Search documents",
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false,
        })
    );
    assert!(tool("analyze_document")["description"].is_string());
    assert!(
        !tools.iter().any(|t| t["name"] == "web_search"),
        "web search is off by default: {tools:#?}"
    );

    // A call: the tool's data as structured content and as text.
    let info = &got["info"];
    assert_eq!(info["isError"], false, "{info:#}");
    assert_eq!(
        info["structured"]["document_id"],
        doc.to_string(),
        "{info:#}"
    );
    let text: Value = serde_json::from_str(info["text"][0].as_str().unwrap()).unwrap();
    assert_eq!(text, info["structured"]);

    // Bad arguments: a result the client's model reads, not a protocol error.
    let bad = &got["bad"];
    assert_eq!(bad["isError"], true, "{bad:#}");
    assert_eq!(
        bad["structured"]["error"]["code"], "invalid_arguments",
        "{bad:#}"
    );
    assert!(
        bad["text"][0].as_str().unwrap().contains("document_id"),
        "{bad:#}"
    );

    // analyze_document: its sub-agent's events as progress, then the result.
    let analysis = &got["analysis"];
    assert_eq!(analysis["isError"], false, "{analysis:#}");
    assert_eq!(
        analysis["structured"]["analysis"],
        "It reclaims dead tuples."
    );
    let progress = analysis["progress"].as_array().unwrap();
    let events: Vec<Value> = progress
        .iter()
        .map(|p| serde_json::from_str(p["message"].as_str().unwrap()).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"subagent_start"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"subagent_end"), "{kinds:?}");
    for kind in [
        "subagent_tool_call",
        "subagent_tool_result",
        "subagent_chunk",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let parent = events[0]["parent_call_id"].as_str().unwrap();
    assert!(parent.starts_with("mcp_"), "{parent}");
    assert!(events.iter().all(|e| e["parent_call_id"] == parent));
    let steps: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");

    // Cancelled: the sub-agent's model request was closed, the call never
    // finished, and the session went on.
    let cancelled = &got["cancelled"];
    assert_eq!(cancelled["finished"], false, "{cancelled:#}");
    assert!(
        model.wait_dropped(1, Duration::from_secs(10)).await,
        "the cancelled call's model request was closed"
    );
    assert_eq!(got["after_cancel"]["isError"], false);
    // Nothing asked after the cancel but the task's own analysis.
    let asked = model.requests();
    assert_eq!(asked.len(), 4, "{asked:#?}");
    assert!(
        asked[3].to_string().contains("What does a task answer?"),
        "{:#}",
        asked[3]
    );

    // Logging, handshake era: after logging/setLevel, the call's start and
    // end, as the SDK hands them to its logging callback.
    assert_eq!(got["logged"]["isError"], false);
    let logs = got["logs"].as_array().unwrap();
    let messages: Vec<&str> = logs
        .iter()
        .map(|l| l["data"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages.len(), 2, "{logs:#?}");
    assert_eq!(messages[0], "document_info started");
    assert!(
        messages[1].starts_with("document_info finished in "),
        "{logs:#?}"
    );
    assert!(logs.iter().all(|l| l["level"] == "info"), "{logs:#?}");

    // 2026-07-28 with the tasks extension: the analysis came back as a task
    // the SDK's extension polled to its end, its result validated against
    // the tool's outputSchema by the SDK; a call's lines at the level the
    // requests carry.
    let modern = &got["modern"];
    assert_eq!(modern["task"]["isError"], false, "{modern:#}");
    assert_eq!(
        modern["task"]["structured"]["analysis"], "A task's answer.",
        "{modern:#}"
    );
    let polled = modern["polled"].as_array().unwrap();
    assert_eq!(polled.first().unwrap()["status"], "working", "{modern:#}");
    assert_eq!(polled.last().unwrap()["status"], "completed", "{modern:#}");
    assert!(polled.iter().all(|p| p["taskId"] == polled[0]["taskId"]));
    assert_eq!(modern["info"]["isError"], false);
    let modern_logs = modern["logs"].as_array().unwrap();
    assert_eq!(modern_logs.len(), 2, "{modern:#}");
    assert_eq!(modern_logs[0]["data"]["message"], "document_info started");

    // Resources, prompts and completion, as the SDK reads them.
    let uri = format!("data-plane://spaces/{space}/documents/{doc}");
    assert_eq!(
        got["resources"],
        json!([{"uri": uri, "name": "guides/vacuum.md", "title": "Vacuuming",
                "mimeType": "text/plain", "size": got["read"][0]["text"].as_str().unwrap().len()}]),
        "{:#}",
        got["resources"]
    );
    assert_eq!(got["read"][0]["uri"], uri.as_str());
    assert!(
        got["read"][0]["text"]
            .as_str()
            .unwrap()
            .contains("dead tuples")
    );
    let prompts: Vec<&str> = got["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        prompts,
        [
            "answer_with_citations",
            "summarise_document",
            "compare_documents"
        ]
    );
    assert_eq!(
        got["prompt"],
        json!([{"role": "user", "type": "text"}, {"role": "user", "type": "resource"},
               {"role": "user", "type": "text"}])
    );
    assert_eq!(got["completion"], json!(["guides/vacuum.md"]));
}

/// A browser page of an origin the deployment did not allow (a foreign
/// site, or a name rebound to this server) is refused 403 before the
/// protocol reads its request; a program (no `Origin`) and the allowed
/// pages are answered. Unset, the allowed origins are this machine's; `*`
/// allows any.
#[tokio::test]
async fn a_page_of_an_origin_not_allowed_is_refused() {
    let server = common::start().await;
    let token = server.token("origins@example.com").await;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "origin-test", "version": "1"},
        },
    });
    let http = reqwest::Client::new();
    let status = |base: String, origin: Option<&'static str>| {
        let mut request = http
            .post(format!("{base}/mcp"))
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
            if origin.contains("evil") {
                request = request.header("host", "evil.example.com");
            }
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let base = server.base.clone();
    assert_eq!(
        status(base.clone(), Some("http://evil.example.com")).await,
        403
    );
    assert_eq!(status(base.clone(), Some("null")).await, 403);
    assert_eq!(status(base.clone(), None).await, 200);
    assert_eq!(
        status(base.clone(), Some("http://localhost:5173")).await,
        200
    );
    assert_eq!(status(base.clone(), Some("http://127.0.0.1:9")).await, 200);

    let state = |origins: Option<Vec<String>>| {
        common::state(
            server.test.db.clone(),
            common::embedder(),
            server.jwt.clone(),
        )
        .with_allowed_origins(origins)
    };
    let listed = common::serve(state(Some(vec!["https://app.example.com:443".into()]))).await;
    assert_eq!(
        status(listed.clone(), Some("https://app.example.com")).await,
        200
    );
    assert_eq!(
        status(listed.clone(), Some("https://app.example.com:443")).await,
        200
    );
    assert_eq!(
        status(listed.clone(), Some("https://app.example.com:8443")).await,
        403
    );
    assert_eq!(
        status(listed.clone(), Some("http://app.example.com")).await,
        403
    );
    assert_eq!(
        status(listed.clone(), Some("http://localhost:5173")).await,
        403
    );
    assert_eq!(status(listed, None).await, 200);
    let any = common::serve(state(None)).await;
    assert_eq!(status(any, Some("http://evil.example.com")).await, 200);
}

/// One JSON-RPC request to `/mcp{query}` and its answer, read from the
/// event stream the endpoint answers with.
async fn rpc(base: &str, token: &str, query: &str, method: &str, params: Value) -> Value {
    rpc_as("2025-06-18", base, token, query, method, params).await
}

/// [`rpc`] under protocol `version`: its header, and from 2026-07-28 on,
/// the method header and the per-request `_meta` that version asks for.
async fn rpc_as(
    version: &str,
    base: &str,
    token: &str,
    query: &str,
    method: &str,
    params: Value,
) -> Value {
    let messages = rpc_messages(version, base, token, query, method, params).await;
    messages
        .iter()
        .find(|m| m["id"] == 7)
        .cloned()
        .unwrap_or_else(|| panic!("no answer to {method} in {messages:?}"))
}

/// Every message of the answer to one request under `version` (the
/// notifications on its stream, then the answer), as [`rpc_as`] sends it;
/// `params["_meta"]` is kept, merged with what the version asks for.
async fn rpc_messages(
    version: &str,
    base: &str,
    token: &str,
    query: &str,
    method: &str,
    mut params: Value,
) -> Vec<Value> {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/mcp{query}"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version);
    if version >= "2026-07-28" {
        request = request.header("mcp-method", method);
        // What the method names (a tool, a prompt, a resource, a task).
        let named = ["name", "uri", "taskId"]
            .iter()
            .find_map(|key| params.get(*key).and_then(Value::as_str));
        if let Some(name) = named {
            request = request.header("mcp-name", name);
        }
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": {"name": "version-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        if let Some(given) = params.get("_meta").and_then(Value::as_object) {
            for (key, value) in given {
                meta[key] = value.clone();
            }
        }
        params["_meta"] = meta;
    }
    let body = request
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // An event stream, or one JSON answer (a refusal before the protocol).
    let answers = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(body.as_str()));
    answers
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .collect()
}

/// The endpoint speaks 2025-06-18 and 2025-11-25 (with `initialize`) and
/// 2026-07-28 (no handshake: `server/discover`, the version in each
/// request's `_meta` and headers), as the protocol's Rust SDK implements
/// them.
#[tokio::test]
async fn every_protocol_version_of_the_sdk_is_spoken() {
    let server = common::start().await;
    let token = server.token("versions@example.com").await;
    let base = &server.base;
    for version in ["2025-06-18", "2025-11-25"] {
        let init = rpc_as(
            version,
            base,
            &token,
            "",
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "version-test", "version": "1"}}),
        )
        .await;
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
    }
    let discovered = rpc_as("2026-07-28", base, &token, "", "server/discover", json!({})).await;
    let result = &discovered["result"];
    // The older 2024-11-05 and 2025-03-26 are still accepted too.
    let supported = result["supportedVersions"].as_array().unwrap();
    for version in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        assert!(supported.contains(&json!(version)), "{discovered}");
    }
    assert!(result["capabilities"]["tools"].is_object(), "{discovered}");
    assert!(
        result["capabilities"]["resources"].is_object(),
        "{discovered}"
    );
    let listed = rpc_as("2026-07-28", base, &token, "", "tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(
        tools.iter().any(|t| t["name"] == "read_document"),
        "{listed}"
    );
}

/// A space `name` of another user, holding a document: (space, document).
async fn someone_elses_space(db: &data_plane_store::Db, name: &str) -> (uuid::Uuid, uuid::Uuid) {
    use data_plane_store::identity::{self, Permission};
    let mut tx = db.begin(data_plane_store::Scope::System).await.unwrap();
    let email = format!("owner-of-{name}@example.com");
    let owner = identity::upsert_user(&mut tx, &email, Some(Permission::User))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    common::space_with_guide(db, name, &[owner.id]).await
}

/// Documents are resources: listed for the endpoint's space, read by URI
/// with the caller's row-level security; another space's document neither
/// lists nor reads, whatever the URI says.
#[tokio::test]
async fn documents_are_resources_listed_and_read_only_where_the_caller_may() {
    let model = FakeModel::start().await;
    let server = common::guide_server("resources@example.com", model.base_url(), false).await;
    let (base, token) = (&server.base, &server.token);
    let in_space = format!("?spaceId={}", server.space);
    let (other_space, other_doc) = someone_elses_space(&server.test.db, "private").await;

    let init = rpc(
        base,
        token,
        &in_space,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "resources-test", "version": "1"}}),
    )
    .await;
    assert!(
        init["result"]["capabilities"]["resources"].is_object(),
        "{init}"
    );

    // A document longer than one read returns.
    let long = {
        let body = "word ".repeat(5_000);
        common::ingest_note(&server.test.db, server.space, "long.txt", body.as_bytes()).await
    };

    let listed = rpc(base, token, &in_space, "resources/list", json!({})).await;
    let resources = listed["result"]["resources"].as_array().unwrap().clone();
    let uri = format!(
        "data-plane://spaces/{}/documents/{}",
        server.space, server.doc
    );
    let names: Vec<&str> = resources
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["guides/vacuum.md", "long.txt"], "{listed}");
    assert_eq!(resources[0]["uri"], uri.as_str());
    assert_eq!(resources[0]["name"], "guides/vacuum.md");
    assert_eq!(resources[0]["mimeType"], "text/plain");
    assert!(resources[0]["size"].as_u64().unwrap() > 0);
    assert!(listed["result"].get("nextCursor").is_none(), "{listed}");
    // Without a space, nothing is listed (tools that need one are not either).
    let none = rpc(base, token, "", "resources/list", json!({})).await;
    assert_eq!(none["result"]["resources"], json!([]));

    let read = rpc(
        base,
        token,
        &in_space,
        "resources/read",
        json!({"uri": uri}),
    )
    .await;
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["uri"], uri.as_str());
    assert_eq!(contents["mimeType"], "text/plain");
    let text = contents["text"].as_str().unwrap();
    assert!(text.contains("VACUUM"), "{text}");
    assert_eq!(
        resources[0]["size"].as_u64().unwrap(),
        text.len() as u64,
        "the size listed is the size read"
    );
    assert!(contents.get("_meta").is_none(), "{read}");
    // The long one: what one read_document call returns, and where it stopped.
    let long_uri = format!("data-plane://spaces/{}/documents/{long}", server.space);
    let read = rpc(
        base,
        token,
        &in_space,
        "resources/read",
        json!({"uri": long_uri}),
    )
    .await;
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["text"].as_str().unwrap().chars().count(), 20_000);
    let meta = &contents["_meta"];
    assert_eq!(meta["truncated"], true, "{read}");
    assert_eq!(meta["returnedChars"], 20_000);
    assert!(meta["totalChars"].as_u64().unwrap() > 20_000, "{meta}");

    // Another space's document: not listed, not read, by any door.
    let theirs = format!("data-plane://spaces/{other_space}/documents/{other_doc}");
    for query in [in_space.as_str(), ""] {
        let refused = rpc(base, token, query, "resources/read", json!({"uri": theirs})).await;
        assert_eq!(refused["error"]["code"], -32002, "{refused}");
        assert!(refused.get("result").is_none());
    }
    let listing = rpc(
        base,
        token,
        &format!("?spaceId={other_space}"),
        "resources/list",
        json!({}),
    )
    .await;
    assert!(listing["error"].is_object(), "{listing}");
    // A document of the caller's named with the other space is not found.
    let mixed = format!("data-plane://spaces/{other_space}/documents/{}", server.doc);
    let refused = rpc(base, token, "", "resources/read", json!({"uri": mixed})).await;
    assert_eq!(refused["error"]["code"], -32002, "{refused}");

    for (method, params) in [
        ("resources/read", json!({"uri": "file:///etc/passwd"})),
        (
            "resources/read",
            json!({"uri": "data-plane://spaces/x/documents/y"}),
        ),
        ("resources/list", json!({"cursor": "not-a-cursor"})),
    ] {
        let refused = rpc(base, token, &in_space, method, params).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
    }
}

/// The prompts ask what the chat agent is asked: its own instructions,
/// rendered for the endpoint's space and tools, then the request, with the
/// documents it names embedded as read_document reads them, and never one
/// of another space.
#[tokio::test]
async fn prompts_carry_the_agents_instructions_and_the_documents_they_name() {
    let model = FakeModel::start().await;
    let server = common::guide_server("prompts@example.com", model.base_url(), true).await;
    let (base, token) = (&server.base, &server.token);
    let in_space = format!("?spaceId={}", server.space);

    let listed = rpc(base, token, &in_space, "prompts/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "answer_with_citations",
            "summarise_document",
            "compare_documents"
        ],
        "{listed}"
    );
    assert_eq!(
        listed["result"]["prompts"][2]["arguments"][1]["name"],
        "second"
    );

    let question = "How does VACUUM reclaim space?";
    let answer = rpc(
        base,
        token,
        &in_space,
        "prompts/get",
        json!({"name": "answer_with_citations", "arguments": {"question": question}}),
    )
    .await;
    let messages = answer["result"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{answer}");
    let instructions = messages[0]["content"]["text"].as_str().unwrap();
    // The shipped system prompt, rendered for this space and its tools.
    assert!(instructions.contains("Cite what you use"), "{instructions}");
    assert!(instructions.contains("guides"), "{instructions}");
    assert!(instructions.contains("search_documents"), "{instructions}");
    assert_eq!(messages[1]["content"]["text"], question);

    // A document by its id in the endpoint's space, embedded as read.
    let summary = rpc(
        base,
        token,
        &in_space,
        "prompts/get",
        json!({"name": "summarise_document", "arguments": {"document": server.doc.to_string()}}),
    )
    .await;
    let messages = summary["result"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{summary}");
    let embedded = &messages[1]["content"];
    assert_eq!(embedded["type"], "resource");
    assert_eq!(
        embedded["resource"]["uri"],
        format!(
            "data-plane://spaces/{}/documents/{}",
            server.space, server.doc
        )
    );
    assert!(
        embedded["resource"]["text"]
            .as_str()
            .unwrap()
            .contains("dead tuples")
    );
    assert!(
        messages[2]["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Summarise")
    );

    // Document arguments complete with paths as one types, and a path is
    // an argument like a URI or an id.
    let complete = |prompt: &'static str, argument: &'static str, value: &'static str| {
        rpc(
            base,
            token,
            &in_space,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": prompt},
                   "argument": {"name": argument, "value": value}}),
        )
    };
    let completed = complete("summarise_document", "document", "GUI").await;
    assert_eq!(
        completed["result"]["completion"]["values"],
        json!(["guides/vacuum.md"]),
        "{completed}"
    );
    let completed = complete("compare_documents", "second", "guides/v").await;
    assert_eq!(
        completed["result"]["completion"]["values"],
        json!(["guides/vacuum.md"])
    );
    for (prompt, argument, value) in [
        ("summarise_document", "document", "nothing-like-it"),
        ("answer_with_citations", "question", "gui"),
    ] {
        let none = complete(prompt, argument, value).await;
        assert_eq!(none["result"]["completion"]["values"], json!([]), "{none}");
    }
    let by_path = rpc(
        base,
        token,
        &in_space,
        "prompts/get",
        json!({"name": "summarise_document", "arguments": {"document": "guides/vacuum.md"}}),
    )
    .await;
    assert_eq!(
        by_path["result"]["messages"][1]["content"]["resource"]["uri"], embedded["resource"]["uri"],
        "{by_path}"
    );

    // Another space's document is not embedded, nor is anything refused
    // quietly: the prompt fails as a read would.
    let (other_space, other_doc) = someone_elses_space(&server.test.db, "kept").await;
    let theirs = format!("data-plane://spaces/{other_space}/documents/{other_doc}");
    let mine = format!(
        "data-plane://spaces/{}/documents/{}",
        server.space, server.doc
    );
    let refused = rpc(
        base,
        token,
        &in_space,
        "prompts/get",
        json!({"name": "compare_documents", "arguments": {"first": mine, "second": theirs}}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32002, "{refused}");
    for (name, arguments) in [
        ("summarise_document", json!({})),
        ("answer_with_citations", json!({"question": "  "})),
        ("no_such_prompt", json!({})),
    ] {
        let refused = rpc(
            base,
            token,
            &in_space,
            "prompts/get",
            json!({"name": name, "arguments": arguments}),
        )
        .await;
        assert_eq!(refused["error"]["code"], -32602, "{name}: {refused}");
    }
}

/// A site on 127.0.0.1 for the web tools: a SearXNG answer at `/search`
/// and a page at `/article`.
async fn small_web() -> String {
    use axum::routing::get;
    let search = async || {
        axum::Json(json!({
            "query": "vacuum", "number_of_results": 1,
            "results": [{
                "url": "https://www.postgresql.org/docs/current/routine-vacuuming.html",
                "title": "Routine Vacuuming", "content": "The autovacuum daemon automates VACUUM.",
                "publishedDate": "2024-11-14T00:00:00", "engine": "duckduckgo",
                "engines": ["duckduckgo"], "positions": [1], "score": 1.0,
                "category": "general", "template": "default.html"
            }],
            "answers": [], "corrections": [], "infoboxes": [], "suggestions": [],
            "unresponsive_engines": []
        }))
    };
    let page = async || {
        axum::response::Html(
            "<!doctype html><html lang=\"en\"><head><title>Vacuum notes</title></head><body>\
             <article><h1>Vacuum notes</h1><p>VACUUM reclaims storage held by dead tuples, \
             and autovacuum runs it for you.</p><p>See <a href=\"/more\">more</a>.</p>\
             </article></body></html>",
        )
    };
    let app = axum::Router::new()
        .route("/search", get(search))
        .route("/article", get(page));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// Every tool lists an outputSchema made from its handler's own output
/// type, and a call of each returns structured content that validates
/// against it; a failed call is an `isError` result carrying the error's
/// code, message and whether a retry may help.
#[tokio::test]
async fn every_tool_declares_its_output_and_each_result_validates_against_it() {
    use data_plane::auth::ServiceTokens;
    use data_plane::state::AppState;
    use data_plane_agent::AgentConfig;
    use data_plane_handlers::{ModelSettings, SubAgentLimits};
    use data_plane_search::KeywordIndex;
    use data_plane_store::content::{self, SourceKind};
    use data_plane_store::identity::{self, MembershipRole, Permission};
    use data_plane_store::{Scope, testing::TestDatabase};
    use data_plane_web::fetch::{FetchConfig, Fetcher};
    use data_plane_web::search::{SearchConfig, WebSearch};

    let web = small_web().await;
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let admin = identity::upsert_user(&mut tx, "shapes@example.com", Some(Permission::Admin))
        .await
        .unwrap()
        .id;
    let (space, _) = identity::ensure_space(&mut tx, "shapes").await.unwrap();
    identity::add_member(&mut tx, space.id, admin, MembershipRole::Viewer)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let guide = common::ingest_note(&db, space.id, "guides/vacuum.md", common::VACUUM_GUIDE).await;
    let csv = common::ingest_note(
        &db,
        space.id,
        "tables/sizes.csv",
        b"table_name,size_mb\norders,42\ncustomers,7\n",
    )
    .await;
    let mut tx = db.begin(Scope::System).await.unwrap();
    let source = content::ensure_source(&mut tx, space.id, "notes", SourceKind::Files)
        .await
        .unwrap();
    let table: String = sqlx::query_scalar("SELECT name FROM doc_tables WHERE document_id = $1")
        .bind(csv)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let model = FakeModel::start().await;
    model.push(text_reply(&["It reclaims the space of dead tuples."]));
    let keys = common::jwt();
    let state = AppState::new(
        db.clone(),
        KeywordIndex::in_memory().unwrap(),
        common::embedder(),
        keys.clone(),
        ServiceTokens::default(),
        std::sync::Arc::new(Fetcher::new(FetchConfig {
            allow: "127.0.0.1".parse().unwrap(),
            ..FetchConfig::default()
        })),
        WebSearch::new(&SearchConfig {
            searxng_url: Some(web.clone()),
            ..SearchConfig::default()
        })
        .unwrap(),
    )
    .unwrap();
    state.connect_model(ModelSettings {
        agent: AgentConfig::new(model.base_url(), "test-model"),
        sub_agent: SubAgentLimits::default(),
    });
    let base = common::serve(state).await;
    let token = keys
        .issue(
            admin,
            "shapes@example.com",
            Permission::Admin,
            Duration::from_secs(600),
        )
        .unwrap();
    let r = reqwest::Client::new()
        .put(format!("{base}/v1/admin/settings"))
        .bearer_auth(&token)
        .json(&json!({
            "web_search_enabled": true,
            "fetch_web_page_trusted_hosts": ["127.0.0.1"],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());

    let in_space = format!("?spaceId={}", space.id);
    let listed = rpc(&base, &token, &in_space, "tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    let calls = [
        (
            "analyze_document",
            json!({"document_id": guide, "question": "What does VACUUM do?"}),
        ),
        ("document_info", json!({"document_id": guide})),
        ("fetch_web_page", json!({"url": format!("{web}/article")})),
        ("find_by_name", json!({"pattern": "*.md"})),
        ("folder_tree", json!({"source_id": source.id})),
        (
            "grep_documents",
            json!({"pattern": "VACUUM", "context_lines": 1}),
        ),
        ("list_folder_contents", json!({"source_id": source.id})),
        ("list_sources", json!({})),
        (
            "query_documents",
            json!({"document_id": csv, "sql": format!("SELECT * FROM {table}")}),
        ),
        (
            "read_document",
            json!({"document_id": guide, "max_length": 20}),
        ),
        (
            "search_documents",
            json!({"query": "reclaim storage of dead tuples"}),
        ),
        ("web_search", json!({"query": "vacuum"})),
    ];
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        calls.iter().map(|(name, _)| *name).collect::<Vec<_>>(),
        "the twelve tools, and no other"
    );
    for (name, args) in calls {
        let tool = tools.iter().find(|t| t["name"] == name).unwrap();
        let schema = &tool["outputSchema"];
        assert_eq!(schema["type"], "object", "{name}: {tool:#}");
        let validator = jsonschema::validator_for(schema)
            .unwrap_or_else(|e| panic!("{name}'s outputSchema does not compile: {e}"));
        let called = rpc(
            &base,
            &token,
            &in_space,
            "tools/call",
            json!({"name": name, "arguments": args}),
        )
        .await;
        let result = &called["result"];
        assert_eq!(result["isError"], false, "{name}: {called:#}");
        let structured = &result["structuredContent"];
        let problems: Vec<String> = validator
            .iter_errors(structured)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            problems.is_empty(),
            "{name}'s result does not validate against its outputSchema: {problems:#?}\n{structured:#}"
        );
        // The same, as text, for clients that read only text.
        let text = result["content"][0]["text"].as_str().unwrap();
        assert_eq!(&serde_json::from_str::<Value>(text).unwrap(), structured);
        // Each schema says something: the top-level fields a result carries.
        let properties = schema["properties"].as_object().unwrap();
        for key in structured.as_object().unwrap().keys() {
            assert!(properties.contains_key(key), "{name}: {key} undeclared");
        }
    }

    // A failure: isError, with the error's code, message and retryable.
    let missing = rpc(
        &base,
        &token,
        &in_space,
        "tools/call",
        json!({"name": "document_info", "arguments": {"document_id": uuid::Uuid::nil()}}),
    )
    .await;
    let result = &missing["result"];
    assert_eq!(result["isError"], true, "{missing:#}");
    let error = &result["structuredContent"]["error"];
    assert_eq!(error["code"], "not_found", "{missing:#}");
    assert!(error["message"].as_str().unwrap().contains("document"));
    assert_eq!(error["retryable"], false);
}

/// The `notifications/message` lines among a call's messages: (level,
/// message).
fn log_lines(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| {
            assert_eq!(m["params"]["logger"], "data-plane", "{m}");
            (
                m["params"]["level"].as_str().unwrap().to_string(),
                m["params"]["data"]["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A caller hears what happens inside its calls at the level it asked for:
/// with `logging/setLevel` (kept for the caller on every replica, since the
/// endpoint has no session), or from 2026-07-28 on in each request's
/// `_meta`; nothing when it asked for nothing.
#[tokio::test]
async fn a_call_logs_its_steps_at_the_level_the_client_asked_for() {
    let model = FakeModel::start().await;
    let server = common::guide_server("logs@example.com", model.base_url(), false).await;
    let (base, token) = (&server.base, &server.token);
    let in_space = format!("?spaceId={}", server.space);
    let good = json!({"name": "document_info", "arguments": {"document_id": server.doc}});
    let bad = json!({"name": "document_info", "arguments": {"document_id": uuid::Uuid::nil()}});
    let call = async |version: &str, params: &Value| {
        let messages = rpc_messages(
            version,
            base,
            token,
            &in_space,
            "tools/call",
            params.clone(),
        )
        .await;
        let answer = messages.iter().find(|m| m["id"] == 7).unwrap();
        assert!(answer["result"].is_object(), "{answer}");
        log_lines(&messages)
    };

    let init = rpc(
        base,
        token,
        &in_space,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "logs-test", "version": "1"}}),
    )
    .await;
    assert!(
        init["result"]["capabilities"]["logging"].is_object(),
        "{init}"
    );
    // Nothing asked for, nothing sent.
    assert_eq!(call("2025-06-18", &good).await, []);

    let set = rpc(
        base,
        token,
        "",
        "logging/setLevel",
        json!({"level": "info"}),
    )
    .await;
    assert_eq!(set["result"], json!({}), "{set}");
    let lines = call("2025-06-18", &good).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], ("info".into(), "document_info started".into()));
    assert_eq!(lines[1].0, "info");
    assert!(
        lines[1].1.starts_with("document_info finished in "),
        "{lines:?}"
    );

    // Kept for the caller, on another replica too: the level is in the
    // database, not in this process.
    let second = common::serve(common::state(
        server.test.db.clone(),
        common::embedder(),
        common::jwt(),
    ))
    .await;
    let lines = rpc_messages(
        "2025-11-25",
        &second,
        token,
        &in_space,
        "tools/call",
        good.clone(),
    )
    .await;
    assert_eq!(log_lines(&lines).len(), 2, "{lines:?}");

    // At `error`, only what failed.
    rpc(
        base,
        token,
        "",
        "logging/setLevel",
        json!({"level": "error"}),
    )
    .await;
    assert_eq!(call("2025-06-18", &good).await, []);
    let lines = call("2025-06-18", &bad).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].0, "error");
    assert!(
        lines[0].1.starts_with("document_info failed: "),
        "{lines:?}"
    );

    // 2026-07-28: the request says its level; the one kept by
    // logging/setLevel is for handshake-era requests only.
    let modern = |level: Option<&str>, params: &Value| {
        let mut params = params.clone();
        if let Some(level) = level {
            params["_meta"] = json!({"io.modelcontextprotocol/logLevel": level});
        }
        params
    };
    assert_eq!(call("2026-07-28", &modern(None, &bad)).await, []);
    let lines = call("2026-07-28", &modern(Some("debug"), &good)).await;
    assert_eq!(
        lines
            .iter()
            .map(|(level, _)| level.as_str())
            .collect::<Vec<_>>(),
        ["info", "info"],
        "{lines:?}"
    );
    // A bad level is refused by the protocol, not stored.
    let wrong = rpc(
        base,
        token,
        "",
        "logging/setLevel",
        json!({"level": "loud"}),
    )
    .await;
    assert!(wrong["error"].is_object(), "{wrong}");
}

/// The resource templates name a document by its path, and a range of its
/// characters; their arguments complete as one types.
#[tokio::test]
async fn templates_name_a_document_by_path_and_a_range_of_it() {
    let model = FakeModel::start().await;
    let server = common::guide_server("templates@example.com", model.base_url(), false).await;
    let (base, token) = (&server.base, &server.token);
    let space = server.space;
    let in_space = format!("?spaceId={space}");
    let db = &server.test.db;
    let text = "Autovacuum tuning: lower the cost delay when workers fall behind.";
    common::ingest_note(db, space, "tuning/café notes.txt", text.as_bytes()).await;

    let listed = rpc(
        base,
        token,
        &in_space,
        "resources/templates/list",
        json!({}),
    )
    .await;
    let templates = listed["result"]["resourceTemplates"].as_array().unwrap();
    let uris: Vec<&str> = templates
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "data-plane://spaces/{space_id}/paths/{path}",
            "data-plane://spaces/{space_id}/paths/{path}{?start,end}",
        ],
        "{listed}"
    );
    assert!(templates.iter().all(|t| t["mimeType"] == "text/plain"));

    let read = async |uri: String| {
        let answer = rpc(
            base,
            token,
            &in_space,
            "resources/read",
            json!({"uri": uri}),
        )
        .await;
        answer["result"]["contents"][0].clone()
    };
    // By path, as the template expands it (what {path} encodes: the slash too).
    let by_path = read(format!(
        "data-plane://spaces/{space}/paths/tuning%2Fcaf%C3%A9%20notes.txt"
    ))
    .await;
    assert_eq!(by_path["text"], text, "{by_path}");
    assert!(by_path.get("_meta").is_none(), "{by_path}");
    let guide = read(format!(
        "data-plane://spaces/{space}/paths/guides/vacuum.md"
    ))
    .await;
    let by_id = read(format!(
        "data-plane://spaces/{space}/documents/{}",
        server.doc
    ))
    .await;
    assert_eq!(guide["text"], by_id["text"]);
    // A range: the characters cited, and where they lie.
    let range = read(format!(
        "data-plane://spaces/{space}/paths/tuning/caf%C3%A9%20notes.txt?start=11&end=17"
    ))
    .await;
    assert_eq!(range["text"], "tuning", "{range}");
    let total = text.chars().count();
    assert_eq!(
        range["_meta"],
        json!({"start": 11, "end": 17, "totalChars": total}),
        "{range}"
    );
    // From an offset to the end, and past the end.
    let tail = read(format!(
        "data-plane://spaces/{space}/paths/tuning/caf%C3%A9%20notes.txt?start=53"
    ))
    .await;
    assert_eq!(tail["text"], "fall behind.", "{tail}");
    let past = read(format!(
        "data-plane://spaces/{space}/paths/tuning/caf%C3%A9%20notes.txt?start=53&end=5000"
    ))
    .await;
    assert_eq!(past["text"], "fall behind.", "{past}");
    assert!(past["_meta"].get("truncated").is_none(), "{past}");
    // Wrong ranges and paths are the client's mistakes, named.
    for (uri, code, says) in [
        (
            format!("data-plane://spaces/{space}/paths/guides/vacuum.md?start=9&end=3"),
            -32602,
            "ends",
        ),
        (
            format!("data-plane://spaces/{space}/paths/guides/nothing.md"),
            -32002,
            "no document at",
        ),
        (
            format!("data-plane://spaces/{space}/paths/guides/vacuum.md?lines=3"),
            -32602,
            "not start or end",
        ),
    ] {
        let answer = rpc(
            base,
            token,
            &in_space,
            "resources/read",
            json!({"uri": uri}),
        )
        .await;
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }

    // Completion: the space, then the path as it is typed (case aside).
    let complete = async |template: &str, argument: &str, value: &str, context: Value| {
        let answer = rpc(
            base,
            token,
            &in_space,
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": template},
                   "argument": {"name": argument, "value": value},
                   "context": {"arguments": context}}),
        )
        .await;
        answer["result"]["completion"]["values"].clone()
    };
    let template = "data-plane://spaces/{space_id}/paths/{path}{?start,end}";
    assert_eq!(
        complete(template, "space_id", "", json!({})).await,
        json!([space.to_string()])
    );
    assert_eq!(
        complete(
            template,
            "path",
            "TUN",
            json!({"space_id": space.to_string()})
        )
        .await,
        json!(["tuning/café notes.txt"])
    );
    assert_eq!(
        complete(template, "path", "", json!({})).await,
        json!(["guides/vacuum.md", "tuning/café notes.txt"])
    );
    assert_eq!(complete(template, "start", "1", json!({})).await, json!([]));
    let unknown = rpc(
        base,
        token,
        &in_space,
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "data-plane://nothing/{x}"},
               "argument": {"name": "x", "value": ""}}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

/// `_meta` declaring the tasks extension on a 2026-07-28 request, with
/// what else `extra` adds.
fn with_tasks(mut params: Value, extra: Value) -> Value {
    let mut meta = json!({"io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    }});
    if let Some(extra) = extra.as_object() {
        for (key, value) in extra {
            meta[key] = value.clone();
        }
    }
    params["_meta"] = meta;
    params
}

/// Long calls run as tasks for a client that takes them (the tasks
/// extension): `tools/call` answers at once, the call goes on as a run of
/// its own, and `tasks/get` and `tasks/cancel` reach it from any replica;
/// the task is its caller's alone.
#[tokio::test]
async fn a_long_call_runs_as_a_task_that_any_replica_answers() {
    let model = FakeModel::start().await;
    // The first task's sub-agent answers.
    model.push(text_reply(&["VACUUM reclaims ", "dead tuples."]));
    let server = common::guide_server("tasks@example.com", model.base_url(), false).await;
    let (base, token) = (&server.base, &server.token);
    let in_space = format!("?spaceId={}", server.space);
    let second = common::serve(common::state(
        server.test.db.clone(),
        common::embedder(),
        common::jwt(),
    ))
    .await;
    let ask = async |at: &str, method: &str, params: Value| {
        rpc_as("2026-07-28", at, token, &in_space, method, params).await
    };
    let analysis = json!({"name": "analyze_document",
        "arguments": {"document_id": server.doc, "question": "What does VACUUM do?"}});

    // Each tool says whether its calls run as tasks.
    let listed = ask(base, "tools/list", json!({})).await;
    let support = |name: &str| {
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["_meta"]["data-plane/task"]
            .clone()
    };
    assert_eq!(support("analyze_document"), "always");
    assert_eq!(support("document_info"), "on_request");
    let discovered = ask(base, "server/discover", json!({})).await;
    assert!(
        discovered["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{discovered}"
    );

    // A task: answered at once, working, then completed with the result
    // as tools/call would have given it, read on the other replica.
    let started = ask(base, "tools/call", with_tasks(analysis.clone(), json!({}))).await;
    let task = &started["result"];
    assert_eq!(task["resultType"], "task", "{started}");
    assert_eq!(task["status"], "working", "{started}");
    assert!(task["pollIntervalMs"].as_u64().unwrap() > 0);
    assert!(task["ttlMs"].as_u64().unwrap() > 0);
    let id = task["taskId"].as_str().unwrap().to_string();
    let poll = async |at: &str, id: &str, until: &str| {
        for _ in 0..200 {
            let got = ask(
                at,
                "tasks/get",
                with_tasks(json!({"taskId": id}), json!({})),
            )
            .await;
            if got["result"]["status"] == until || got.get("error").is_some() {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("task {id} never became {until}");
    };
    let done = poll(&second, &id, "completed").await;
    let result = &done["result"]["result"];
    assert_eq!(result["isError"], false, "{done}");
    assert_eq!(
        result["structuredContent"]["analysis"], "VACUUM reclaims dead tuples.",
        "{done}"
    );
    assert_eq!(done["result"]["resultType"], "complete");

    // Its events are a run's: readable as they happened, tool_result last
    // before done.
    let events = reqwest::Client::new()
        .get(format!("{base}/v1/runs/{id}/events"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for kind in [
        "run",
        "tool_call",
        "subagent_start",
        "subagent_end",
        "tool_result",
        "done",
    ] {
        assert!(
            events.contains(&format!("event: {kind}")),
            "{kind}: {events}"
        );
    }

    // Without the extension on the request, the same call answers itself.
    model.push(text_reply(&["Direct."]));
    let direct = ask(base, "tools/call", analysis.clone()).await;
    assert_eq!(direct["result"]["isError"], false, "{direct}");
    assert!(direct["result"].get("taskId").is_none(), "{direct}");
    // A short tool runs as a task when the request asks.
    let info = json!({"name": "document_info", "arguments": {"document_id": server.doc}});
    let plain = ask(base, "tools/call", with_tasks(info.clone(), json!({}))).await;
    assert!(plain["result"]["structuredContent"].is_object(), "{plain}");
    let asked = ask(
        base,
        "tools/call",
        with_tasks(info, json!({"data-plane/task": true})),
    )
    .await;
    assert_eq!(asked["result"]["resultType"], "task", "{asked}");
    let asked_id = asked["result"]["taskId"].as_str().unwrap().to_string();
    let info_done = poll(base, &asked_id, "completed").await;
    assert_eq!(
        info_done["result"]["result"]["structuredContent"]["document_id"],
        server.doc.to_string()
    );

    // Cancelled from the other replica: the sub-agent's model request is
    // closed, and the task says so.
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(json!({"role": "assistant", "content": "Hmm"}), None)),
        Piece::Hang,
    ]));
    let hanging = ask(base, "tools/call", with_tasks(analysis.clone(), json!({}))).await;
    let hanging = hanging["result"]["taskId"].as_str().unwrap().to_string();
    assert!(model.wait_requests(3, Duration::from_secs(10)).await);
    let still = ask(
        &second,
        "tasks/get",
        with_tasks(json!({"taskId": hanging}), json!({})),
    )
    .await;
    assert_eq!(still["result"]["status"], "working", "{still}");
    let ack = ask(
        &second,
        "tasks/cancel",
        with_tasks(json!({"taskId": hanging}), json!({})),
    )
    .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let cancelled = poll(&second, &hanging, "cancelled").await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert!(
        model.wait_dropped(1, Duration::from_secs(10)).await,
        "the task's model request was closed"
    );

    // Another person knows the id, and gets nothing of it.
    let mut tx = server
        .test
        .db
        .begin(data_plane_store::Scope::System)
        .await
        .unwrap();
    let other = data_plane_store::identity::upsert_user(
        &mut tx,
        "someone@example.com",
        Some(data_plane_store::identity::Permission::Admin),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let their = common::jwt()
        .issue(
            other.id,
            "someone@example.com",
            data_plane_store::identity::Permission::Admin,
            Duration::from_secs(60),
        )
        .unwrap();
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        let mut params = with_tasks(json!({"taskId": id}), json!({}));
        if method == "tasks/update" {
            params["inputResponses"] = json!({});
        }
        let refused = rpc_as("2026-07-28", base, &their, "", method, params).await;
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no task"),
            "{method}: {refused}"
        );
    }
    // And a client that did not declare the extension cannot poll.
    let undeclared = ask(base, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
}

/// 2026-07-28's `subscriptions/listen`: a client watching a document (by
/// id, by path) and its space's list hears when the document is
/// re-ingested or deleted, through whichever replica; a document of a
/// space it does not read is never reported.
#[tokio::test]
async fn a_subscription_hears_of_watched_documents_changing() {
    use data_plane_search::KeywordIndex;
    use data_plane_search::follower::Follower;
    use data_plane_store::content;
    use data_plane_store::identity::{self, Permission};
    use eventsource_stream::Eventsource;
    use futures::StreamExt;

    let test = data_plane_store::testing::TestDatabase::create().await;
    let db = test.db.clone();
    let mut tx = db.begin(data_plane_store::Scope::System).await.unwrap();
    let user = identity::upsert_user(&mut tx, "watcher@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let (space, doc) = common::space_with_guide(&db, "watched", &[user]).await;
    let (other_space, other_doc) = someone_elses_space(&db, "unwatched").await;
    let state = common::state(db.clone(), common::embedder(), common::jwt());
    // What the follower applied, as the subscriptions hear it.
    let mut applied = state.document_changes.subscribe();
    let (_stop, stop) = tokio::sync::watch::channel(false);
    let follower = Follower::new(db.clone(), KeywordIndex::in_memory().unwrap())
        .with_changes(state.document_changes.clone());
    follower.catch_up().await.unwrap();
    tokio::spawn(follower.run(stop));
    let base = common::serve(state).await;
    let token = common::jwt()
        .issue(
            user,
            "watcher@example.com",
            Permission::User,
            Duration::from_secs(600),
        )
        .unwrap();

    let by_id = format!("data-plane://spaces/{space}/documents/{doc}");
    let by_path = format!("data-plane://spaces/{space}/paths/guides/vacuum.md");
    let theirs = format!("data-plane://spaces/{other_space}/documents/{other_doc}");
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {
        "notifications": {
            "resourceSubscriptions": [by_id, by_path, theirs, "https://elsewhere/x"],
            "resourcesListChanged": true,
        },
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "watch-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }});
    let response = reqwest::Client::new()
        .post(format!("{base}/mcp?spaceId={space}"))
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream().eventsource();
    let mut next = async || -> Value {
        let event = tokio::time::timeout(Duration::from_secs(15), stream.next())
            .await
            .expect("a message within 15 s")
            .expect("the stream goes on")
            .unwrap();
        serde_json::from_str(&event.data).unwrap()
    };
    let ack = next().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    let accepted = &ack["params"]["notifications"];
    assert_eq!(accepted["resourcesListChanged"], true, "{ack}");
    // Ours only: the foreign URI is not accepted; the other space's is
    // accepted (nothing says whether it exists) but never reported.
    assert_eq!(
        accepted["resourceSubscriptions"],
        json!([by_id, by_path, theirs]),
        "{ack}"
    );

    // Re-ingested: the list, then the document by id and by path.
    let ingest = async |space_id: uuid::Uuid, text: &[u8]| {
        common::ingest_note(&db, space_id, "guides/vacuum.md", text).await;
    };
    // The other space changes first, and the follower has applied it
    // before the watched document changes: nothing of it may arrive.
    ingest(
        other_space,
        b"# Theirs\n\nChanged where the watcher cannot read.\n",
    )
    .await;
    loop {
        let batch = tokio::time::timeout(Duration::from_secs(15), applied.recv())
            .await
            .unwrap()
            .unwrap();
        if batch.iter().any(|e| e.space_id == other_space) {
            break;
        }
    }
    ingest(
        space,
        b"# Vacuuming\n\nVACUUM reclaims storage; autovacuum runs it.\n",
    )
    .await;
    let mut heard = Vec::new();
    while heard.len() < 3 {
        heard.push(next().await);
    }
    assert_eq!(
        heard[0]["method"], "notifications/resources/list_changed",
        "{heard:#?}"
    );
    let updated: Vec<&Value> = heard[1..].iter().map(|m| &m["params"]["uri"]).collect();
    assert_eq!(updated, [&json!(by_id), &json!(by_path)], "{heard:#?}");

    // Deleted: both again, and the list.
    let mut tx = db.begin(data_plane_store::Scope::System).await.unwrap();
    assert!(content::delete_document(&mut tx, doc).await.unwrap());
    tx.commit().await.unwrap();
    let mut heard = Vec::new();
    while heard.len() < 3 {
        heard.push(next().await);
    }
    assert!(
        heard.iter().all(|m| m["params"]["uri"] != json!(theirs)),
        "{heard:#?}"
    );
    assert_eq!(heard[0]["method"], "notifications/resources/list_changed");
    let updated: Vec<&Value> = heard[1..].iter().map(|m| &m["params"]["uri"]).collect();
    assert_eq!(updated, [&json!(by_id), &json!(by_path)], "{heard:#?}");

    // The other space changes again: still nothing, then or later.
    ingest(other_space, b"# Theirs\n\nChanged once more.\n").await;
    let quiet = tokio::time::timeout(Duration::from_millis(800), stream.next()).await;
    assert!(quiet.is_err(), "nothing more was sent: {quiet:?}");

    // A handshake-era subscription is refused with the way to do it.
    let legacy = rpc(
        &base,
        &token,
        "",
        "resources/subscribe",
        json!({"uri": format!("data-plane://spaces/{space}/documents/{doc}")}),
    )
    .await;
    assert!(
        legacy["error"]["message"]
            .as_str()
            .unwrap()
            .contains("subscriptions/listen"),
        "{legacy}"
    );
}

/// A replica stopped with SIGTERM lets the task it runs finish before it
/// exits: the task ends `completed` with its result, not lost.
#[tokio::test]
async fn a_task_finishes_before_its_replica_stops() {
    use data_plane_store::identity::{self, Permission};
    let model = FakeModel::start().await;
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(
            json!({"role": "assistant", "content": "Slow "}),
            None,
        )),
        Piece::Pause(Duration::from_secs(2)),
        Piece::Chunk(chunk(json!({"content": "answer."}), Some("stop"))),
        Piece::Done,
    ]));
    let test = data_plane_store::testing::TestDatabase::create().await;
    let mut tx = test
        .db
        .begin(data_plane_store::Scope::System)
        .await
        .unwrap();
    let user = identity::upsert_user(&mut tx, "stopping@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let (space, doc) = common::space_with_guide(&test.db, "stopping", &[user]).await;
    let data_dir = tempfile::tempdir().unwrap();
    let addr = data_plane_testkit::unused_addr();
    let mut process = common::server_process(&test, data_dir.path(), addr)
        .env("DATA_PLANE_JWT_SECRET", common::JWT_SECRET)
        .env("OPENAI_BASE_URL", model.base_url())
        .env("DATA_PLANE_MODEL", "test-model")
        // The fake model is on loopback; as a remote one it is offered
        // analyze_document.
        .env("DATA_PLANE_LOCAL_MODEL", "false")
        .spawn()
        .unwrap();
    let base = format!("http://{addr}");
    common::wait_ready(&base).await;
    let token = common::jwt()
        .issue(
            user,
            "stopping@example.com",
            Permission::User,
            Duration::from_secs(600),
        )
        .unwrap();
    let started = rpc_as(
        "2026-07-28",
        &base,
        &token,
        &format!("?spaceId={space}"),
        "tools/call",
        with_tasks(
            json!({"name": "analyze_document",
                   "arguments": {"document_id": doc, "question": "Slow?"}}),
            json!({}),
        ),
    )
    .await;
    let task: uuid::Uuid = started["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .parse()
        .unwrap();
    assert!(model.wait_requests(1, Duration::from_secs(10)).await);
    let term = std::process::Command::new("kill")
        .args(["-TERM", &process.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let exited = tokio::task::spawn_blocking(move || process.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exited.success(), "{exited:?}");
    let mut tx = test
        .db
        .begin(data_plane_store::Scope::System)
        .await
        .unwrap();
    let (status, result): (String, Value) = sqlx::query_as(
        "SELECT r.status::text, e.data FROM runs r
           JOIN run_events e ON e.run_id = r.id AND e.kind = 'tool_result'
          WHERE r.id = $1",
    )
    .bind(task)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(status, "done");
    assert_eq!(
        result["result"]["data"]["analysis"], "Slow answer.",
        "{result}"
    );
}
