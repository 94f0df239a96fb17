//! analyze_document over HTTP: a real server on 127.0.0.1 with its language
//! model pointed at a fake OpenAI-compatible endpoint (also on 127.0.0.1),
//! the real PostgreSQL and the local embedding model. With
//! `Accept: text/event-stream` the sub-agent's progress arrives as
//! `subagent_*` events, in order, each carrying the id of the call.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{FakeModel, ScriptedCall, text_reply, tool_calls_reply};
use data_plane_handlers::{ModelSettings, SubAgentLimits};
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_store::Scope;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use futures::StreamExt;
use serde_json::{Value, json};

#[tokio::test]
async fn analyze_document_streams_its_sub_agent_over_sse() {
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let embedder = common::embedder();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let alice = identity::upsert_user(&mut tx, "alice@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let (alpha, _) = identity::ensure_space(&mut tx, "alpha").await.unwrap();
    identity::add_member(&mut tx, alpha.id, alice, MembershipRole::Viewer)
        .await
        .unwrap();
    let source = content::ensure_source(&mut tx, alpha.id, "notes", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let doc = Pipeline::new(db.clone(), embedder.clone())
        .ingest_file(
            Scope::System,
            Target {
                space_id: alpha.id,
                source_id: source.id,
            },
            "guides/vacuum.md",
            b"# Vacuuming\n\nVACUUM reclaims storage occupied by dead tuples.\n",
        )
        .await
        .unwrap()
        .document_id;

    let fake = FakeModel::start().await;
    let read = format!(r#"{{"document_id":"{doc}"}}"#);
    fake.push(tool_calls_reply(&[ScriptedCall {
        id: "call_sub_1",
        name: "read_document",
        fragments: &[read.as_str()],
    }]));
    fake.push(text_reply(&["It says VACUUM ", "reclaims dead tuples."]));

    let jwt = common::jwt();
    let state = common::state(db.clone(), embedder, jwt.clone());
    state.connect_model(ModelSettings {
        agent: AgentConfig::new(fake.base_url(), "test-model"),
        sub_agent: SubAgentLimits::default(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, data_plane::http::service(state)).await });

    let token = jwt
        .issue(
            alice,
            "alice@example.com",
            Permission::User,
            std::time::Duration::from_secs(600),
        )
        .unwrap();
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/tools/analyze_document/execute"))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .json(&json!({
            "args": { "document_id": doc, "question": "What does VACUUM do?" },
            "spaceId": alpha.id,
            "callId": "call_top",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    let mut events = eventsource_stream::EventStream::new(r.bytes_stream());
    let mut seen: Vec<(String, Value)> = Vec::new();
    while let Some(event) = events.next().await {
        let event = event.unwrap();
        let data: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(data["type"], event.event);
        seen.push((event.event, data));
    }
    let kinds: Vec<&str> = seen.iter().map(|(k, _)| k.as_str()).collect();
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
            "done",
        ]
    );
    assert_eq!(seen[0].1["call_id"], "call_top");
    for (kind, data) in &seen[1..7] {
        assert_eq!(data["parent_call_id"], "call_top", "{kind}: {data}");
    }
    assert_eq!(seen[2].1["name"], "read_document");
    assert_eq!(seen[2].1["call_id"], "call_sub_1");
    assert_eq!(seen[3].1["result"]["success"], true);
    // The text parser holds a trailing space until it knows no call markup
    // follows; the next chunk carries it.
    assert_eq!(seen[4].1["text"], "It says VACUUM");
    assert_eq!(seen[5].1["text"], " reclaims dead tuples.");
    let result = &seen[7].1["result"];
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(
        result["data"]["analysis"],
        "It says VACUUM reclaims dead tuples."
    );
    assert_eq!(result["data"]["steps"], 2);
    assert_eq!(seen[8].1["success"], true);
    assert_eq!(fake.requests().len(), 2);
}
