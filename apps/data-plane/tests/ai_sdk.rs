//! `/v1/chat` as the Vercel AI SDK's UI message stream, read by the SDK
//! itself (the `ai` package from npm, run by node: its DefaultChatTransport
//! and readUIMessageStream; tests/e2e/ai_sdk.mjs) from a real server on
//! 127.0.0.1 with PostgreSQL and a fake model: the assembled message holds
//! the text, the tool call with its input and output, and the sub-agent's
//! progress as a data part under its parent call; the SDK's own messages
//! sent back on the next turn reach the model as the OpenAI conversation;
//! a call that asks for approval, denied and approved, read as the SDK's
//! approval parts.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{FakeModel, ScriptedCall, text_reply, tool_calls_reply};
use data_plane_store::Scope;
use data_plane_store::identity::{self, Permission};
use data_plane_store::testing::TestDatabase;
use futures::StreamExt;
use serde_json::{Value, json};

const FIRST: &str = "What does the vacuum guide say?";
const SECOND: &str = "And in one word?";
const FETCH: &str = "Fetch the report.";

fn node() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let node = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .flat_map(|d| ["node", "nodejs"].map(|n| d.join(n)))
            .find(|p| p.is_file())
    });
    let sdk = dir.join("node_modules/ai/package.json");
    assert!(
        node.is_some() && sdk.is_file(),
        "this test needs node and the `ai` package in {}: run `make setup`",
        dir.display()
    );
    (node.unwrap(), dir)
}

#[tokio::test]
async fn the_ai_sdk_reads_the_ui_message_stream_into_its_messages() {
    let (node, dir) = node();
    let model = FakeModel::start().await;
    // The chat agent with the shipped prompt, which asks for citations.
    let server = common::guide_server("sdk@example.com", model.base_url(), true).await;
    let (base, token, space, doc) = (&server.base, &server.token, server.space, server.doc);
    let analyze = json!({"document_id": doc, "question": "what does it say?"}).to_string();
    let (head, tail) = analyze.split_at(25);
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_analyze",
        name: "analyze_document",
        fragments: &[head, tail],
    }]));
    // The sub-agent: reads its document, answers.
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_read",
        name: "read_document",
        fragments: &["{\"max_length\": 200}"],
    }]));
    model.push(text_reply(&["It reclaims ", "dead tuples."]));
    model.push(text_reply(&["VACUUM ", "reclaims storage."]));
    // The second turn searches and cites the hit by its number.
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_search",
        name: "search_documents",
        fragments: &["{\"query\": \"vacuum reclaims storage\"}"],
    }]));
    model.push(text_reply(&["Reclaims [1]."]));
    // Two turns whose fetch of a host that is not trusted asks first: the
    // script denies the first and approves the second (a private address,
    // which the SSRF guard then refuses).
    for id in ["call_fetch_denied", "call_fetch_approved"] {
        model.push(tool_calls_reply(&[ScriptedCall {
            id,
            name: "fetch_web_page",
            fragments: &["{\"url\": \"http://10.20.30.40/report\"}"],
        }]));
        model.push(text_reply(&["Done."]));
    }

    let output = tokio::process::Command::new(&node)
        .arg("ai_sdk.mjs")
        .current_dir(&dir)
        .env("DATA_PLANE_URL", base)
        .env("USER_TOKEN", token)
        .env("SPACE_ID", space.to_string())
        .env("FIRST_QUESTION", FIRST)
        .env("SECOND_QUESTION", SECOND)
        .env("APPROVAL_QUESTION", FETCH)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), output)
        .await
        .expect("the SDK's client finished within a minute")
        .unwrap();
    assert!(
        output.status.success(),
        "node ai_sdk.mjs failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let got: Value = serde_json::from_slice(&output.stdout).unwrap();
    let first = &got["first"];
    assert_eq!(first["role"], "assistant");
    assert_eq!(first["metadata"]["reason"], "stop", "{first:#}");
    assert!(first["metadata"]["runId"].is_string(), "{first:#}");
    let parts = first["parts"].as_array().unwrap();
    let of = |kind: &str| -> Vec<&Value> { parts.iter().filter(|p| p["type"] == kind).collect() };

    // The tool call: its input as streamed in fragments, its output.
    let tools = of("dynamic-tool");
    assert_eq!(tools.len(), 1, "{first:#}");
    let tool = tools[0];
    assert_eq!(tool["toolName"], "analyze_document");
    assert_eq!(tool["toolCallId"], "call_analyze");
    assert_eq!(tool["state"], "output-available", "{tool:#}");
    assert_eq!(
        tool["input"],
        json!({"document_id": doc, "question": "what does it say?"})
    );
    assert_eq!(tool["output"]["analysis"], "It reclaims dead tuples.");

    // The sub-agent under its parent call, as one data part kept current.
    let sub = of("data-subagent");
    assert_eq!(sub.len(), 1, "{first:#}");
    assert_eq!(sub[0]["id"], "call_analyze");
    let data = &sub[0]["data"];
    assert!(
        data["task"].as_str().unwrap().contains("what does it say?"),
        "{data:#}"
    );
    assert_eq!(data["text"], "It reclaims dead tuples.");
    assert_eq!(data["calls"][0]["name"], "read_document");
    assert_eq!(data["calls"][0]["result"]["success"], true, "{data:#}");
    assert_eq!(data["done"], true);

    // The answer after it, in a step of its own.
    let texts = of("text");
    assert_eq!(texts.len(), 1, "{first:#}");
    assert_eq!(texts[0]["text"], "VACUUM reclaims storage.");
    assert_eq!(texts[0]["state"], "done");
    assert_eq!(of("step-start").len(), 2, "{first:#}");

    let second = &got["second"];
    let parts = second["parts"].as_array().unwrap();
    let text = parts.iter().rev().find(|p| p["type"] == "text").unwrap();
    assert_eq!(text["text"], "Reclaims [1].");
    // The cited hit as a source part, its span in the metadata.
    let sources: Vec<&Value> = parts
        .iter()
        .filter(|p| p["type"] == "source-document")
        .collect();
    assert_eq!(sources.len(), 1, "{second:#}");
    let source = sources[0];
    assert_eq!(source["sourceId"], "1");
    assert_eq!(source["mediaType"], "text/plain");
    assert_eq!(source["filename"], "guides/vacuum.md");
    let cited = &source["providerMetadata"]["dataPlane"];
    assert_eq!(cited["documentId"], doc.to_string());
    assert!(
        cited["charEnd"].as_u64() > cited["charStart"].as_u64(),
        "{cited}"
    );
    assert!(
        cited["text"].as_str().unwrap().contains("VACUUM"),
        "{cited}"
    );
    let types: Vec<&str> = got["chunkTypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for kind in [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "data-subagent",
        "tool-output-available",
        "finish-step",
        "text-start",
        "text-delta",
        "text-end",
        "source-document",
        "tool-approval-request",
        "tool-output-denied",
        "tool-output-error",
        "finish",
    ] {
        assert!(types.contains(&kind), "no {kind} chunk in {types:?}");
    }

    // The approvals, as the SDK assembled them: the denied call ends
    // `output-denied`, the approved one runs (and fails at the guard).
    let tool_of = |message: &Value| -> Value {
        let tools: Vec<&Value> = message["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["type"] == "dynamic-tool")
            .collect();
        assert_eq!(tools.len(), 1, "{message:#}");
        tools[0].clone()
    };
    let denied = tool_of(&got["denied"]);
    assert_eq!(denied["toolCallId"], "call_fetch_denied");
    assert_eq!(denied["state"], "output-denied", "{denied:#}");
    assert_eq!(denied["approval"]["id"], "call_fetch_denied", "{denied:#}");
    let approved = tool_of(&got["approved"]);
    assert_eq!(approved["toolCallId"], "call_fetch_approved");
    assert_eq!(approved["state"], "output-error", "{approved:#}");
    assert!(
        approved["errorText"]
            .as_str()
            .unwrap()
            .contains("public internet"),
        "{approved:#}"
    );
    let denied_fed_back = model.requests()[7]["messages"].to_string();
    assert!(
        denied_fed_back.contains("was not approved"),
        "{denied_fed_back}"
    );

    // The SDK's messages, sent back, reached the model as the OpenAI
    // conversation: the question, the call, its result, the answer.
    let requests = model.requests();
    assert_eq!(requests.len(), 10);
    let sent: Vec<&Value> = requests[4]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .collect();
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"]);
    assert_eq!(sent[0]["content"], FIRST);
    assert_eq!(sent[1]["tool_calls"][0]["id"], "call_analyze");
    assert_eq!(
        sent[1]["tool_calls"][0]["function"]["name"],
        "analyze_document"
    );
    let result: Value = serde_json::from_str(sent[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["success"], true);
    assert_eq!(result["data"]["analysis"], "It reclaims dead tuples.");
    assert_eq!(sent[3]["content"], "VACUUM reclaims storage.");
    assert_eq!(sent[4]["content"], SECOND);
}

/// The same stream read raw: chunks as `data:` lines under the run's event
/// ids, the header that names the protocol, `[DONE]` last; a resume after
/// an event id leaves out the chunks of the events up to it.
#[tokio::test]
async fn the_ui_message_stream_on_the_wire_and_resumed() {
    let test = TestDatabase::create().await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let user = identity::upsert_user(&mut tx, "raw@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let model = FakeModel::start().await;
    model.push(text_reply(&["Hello", " there"]));
    let jwt = common::jwt();
    let state = common::state(test.db.clone(), common::embedder(), jwt.clone());
    let base = common::serve(
        state
            .with_agent(AgentConfig::new(model.base_url(), "test-model"))
            .unwrap(),
    )
    .await;
    let token = jwt
        .issue(
            user,
            "raw@example.com",
            Permission::User,
            Duration::from_secs(600),
        )
        .unwrap();
    let read = |r: reqwest::Response| async move {
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-vercel-ai-ui-message-stream"], "v1");
        let mut out = Vec::new();
        let mut stream = eventsource_stream::EventStream::new(r.bytes_stream());
        while let Some(e) = stream.next().await {
            let e = e.unwrap();
            out.push((e.id, e.data));
        }
        out
    };
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/chat"))
        .bearer_auth(&token)
        .json(&json!({"messages": [{"role": "user", "content": "hi"}], "options": {"format": "ui-message"}}))
        .send()
        .await
        .unwrap();
    let run_id = r.headers()["x-run-id"].to_str().unwrap().to_string();
    let all = read(r).await;
    let types: Vec<String> = all
        .iter()
        .map(|(_, d)| {
            if d == "[DONE]" {
                d.clone()
            } else {
                serde_json::from_str::<Value>(d).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            }
        })
        .collect();
    assert_eq!(
        types,
        [
            "start",
            "start-step",
            "text-start",
            "text-delta",
            "text-delta",
            "text-end",
            "finish-step",
            "finish",
            "[DONE]"
        ]
    );
    let start: Value = serde_json::from_str(&all[0].1).unwrap();
    assert_eq!(start["messageId"], run_id.as_str());
    assert_eq!(all[0].0, "1");
    // Resumed after event 2 (the first text): the rest only.
    let r = reqwest::Client::new()
        .get(format!("{base}/v1/runs/{run_id}/events?format=ui-message"))
        .bearer_auth(&token)
        .header("last-event-id", "2")
        .send()
        .await
        .unwrap();
    let rest = read(r).await;
    assert_eq!(rest, all[4..].to_vec());
}
