//! `POST /v1/chat` against a real server on 127.0.0.1, the real registry,
//! handlers and PostgreSQL, and a fake OpenAI-compatible model endpoint:
//! streamed text, a real tool call fed back to the model, tool discovery
//! (`options.toolSearch`), upstream failures
//! as `error` events, no model configured, JSON errors, and a client that
//! hangs up cancelling everything after it.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use data_plane::auth::JwtKeys;
use data_plane::state::AppState;
use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{
    FakeModel, Piece, Reply, ScriptedCall, chunk, text_reply, tool_calls_reply, unused_base_url,
};
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_store::Scope;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

struct World {
    test: TestDatabase,
    jwt: JwtKeys,
    /// The server without a model.
    state: AppState,
    alice: Uuid,
    alpha: Uuid,
    beta: Uuid,
    doc: Uuid,
}

async fn world() -> World {
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let embedder = common::embedder();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let alice = identity::upsert_user(&mut tx, "alice@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let (alpha, _) = identity::ensure_space(&mut tx, "alpha").await.unwrap();
    let (beta, _) = identity::ensure_space(&mut tx, "beta").await.unwrap();
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
    let jwt = common::jwt();
    let state = common::state(db, embedder, jwt.clone());
    World {
        test,
        jwt,
        state,
        alice,
        alpha: alpha.id,
        beta: beta.id,
        doc,
    }
}

impl World {
    fn alice(&self) -> String {
        self.jwt
            .issue(
                self.alice,
                "alice@example.com",
                Permission::User,
                Duration::from_secs(600),
            )
            .unwrap()
    }

    /// A server whose chat model is `model`, with short timeouts.
    async fn server_with(&self, base_url: String) -> String {
        let mut config = AgentConfig::new(base_url, "test-model");
        config.api_key = Some("sk-test".into());
        config.max_steps = 4;
        config.first_byte_timeout = Duration::from_millis(500);
        config.idle_timeout = Duration::from_millis(500);
        common::serve(self.state.clone().with_agent(config).unwrap()).await
    }
}

fn user(text: &str) -> Value {
    json!({ "role": "user", "content": text })
}

async fn post_chat(base: &str, token: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/chat"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Every event of a stream after its `run` event: (id, type, body), read
/// with a real SSE parser. The `run` event comes first, id 1, naming the
/// run of the `x-run-id` header.
async fn events_of(r: reqwest::Response) -> Vec<(String, String, Value)> {
    assert_eq!(r.status(), StatusCode::OK);
    let run_id = r.headers()["x-run-id"].to_str().unwrap().to_string();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(r.headers()["x-accel-buffering"], "no");
    let mut stream = eventsource_stream::EventStream::new(r.bytes_stream());
    let mut seen = Vec::new();
    let read = async {
        while let Some(event) = stream.next().await {
            let event = event.unwrap();
            let data: Value = serde_json::from_str(&event.data).unwrap();
            assert_eq!(data["type"], event.event, "the JSON names its own type");
            seen.push((event.id.clone(), event.event.clone(), data));
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("the stream ended");
    let (id, kind, run) = seen.remove(0);
    assert_eq!((id.as_str(), kind.as_str()), ("1", "run"));
    assert_eq!(run["run_id"], run_id.as_str());
    assert!(run["conversation_id"].is_string());
    seen
}

/// `GET /v1/runs/{id}` until `done` holds for it (20 s at most).
async fn run_when(base: &str, token: &str, run_id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let look = async {
        loop {
            let (status, run) = json_of(
                reqwest::Client::new()
                    .get(format!("{base}/v1/runs/{run_id}"))
                    .bearer_auth(token)
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{run}");
            if done(&run) {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), look)
        .await
        .expect("the run came to the state awaited")
}

async fn json_of(r: reqwest::Response) -> (StatusCode, Value) {
    let status = r.status();
    let ctype = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ctype.starts_with("application/json"), "{status}: {ctype}");
    (status, r.json().await.unwrap())
}

/// The stream with what changes from run to run (call ids, durations)
/// replaced, for comparison with a written-down expectation.
fn redacted(events: &[(String, String, Value)]) -> Vec<Value> {
    fn scrub(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    match k.as_str() {
                        "duration_ms" => *v = json!("[ms]"),
                        "call_id" if v.as_str().is_some_and(|s| !s.starts_with("call_model")) => {
                            *v = json!("[id]")
                        }
                        _ => scrub(v),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(scrub),
            _ => {}
        }
    }
    events
        .iter()
        .map(|(id, _, data)| {
            let mut data = data.clone();
            scrub(&mut data);
            json!({ "id": id, "data": data })
        })
        .collect()
}

#[tokio::test]
async fn text_streams_as_deltas_then_done() {
    let w = world().await;
    let model = FakeModel::start().await;
    model.push(text_reply(&["Hello", ", Alice"]));
    let base = w.server_with(model.base_url()).await;
    let r = post_chat(&base, &w.alice(), &json!({ "messages": [user("hi")] })).await;
    let events = events_of(r).await;
    assert_eq!(
        redacted(&events),
        [
            json!({"id": "2", "data": {"type": "text_delta", "text": "Hello"}}),
            json!({"id": "3", "data": {"type": "text_delta", "text": ", Alice"}}),
            json!({"id": "4", "data": {"type": "done", "reason": "stop", "steps": 1,
                "usage": {"prompt_tokens": 20, "completion_tokens": 2}}}),
        ]
    );
    // Without a space the model is offered what GET /v1/tools lists.
    let listed: Value = reqwest::Client::new()
        .get(format!("{base}/v1/tools"))
        .bearer_auth(w.alice())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(model.requests()[0]["tools"], listed["tools"]);
}

#[tokio::test]
async fn a_real_tool_runs_and_its_result_goes_back_to_the_model() {
    let w = world().await;
    let model = FakeModel::start().await;
    let doc = w.doc.to_string();
    let fragments = [
        "{\"document_id\":".to_string(),
        format!(" \"{doc}\","),
        " \"max_length\": 20}".to_string(),
    ];
    let fragments: Vec<&str> = fragments.iter().map(String::as_str).collect();
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_model_1",
        name: "read_document",
        fragments: &fragments,
    }]));
    model.push(text_reply(&["It is about VACUUM."]));
    let base = w.server_with(model.base_url()).await;
    let r = post_chat(
        &base,
        &w.alice(),
        &json!({ "messages": [user("what is in the guide?")], "spaceId": w.alpha }),
    )
    .await;
    let events = events_of(r).await;
    let got = redacted(&events);
    let fragment = |id: &str, text: &str| {
        json!({"id": id, "data": {"type": "tool_call", "call_id": "call_model_1", "index": 0,
            "name": "read_document", "arguments_delta": text, "partial": true}})
    };
    assert_eq!(got[0], fragment("2", fragments[0]));
    assert_eq!(got[1], fragment("3", fragments[1]));
    assert_eq!(got[2], fragment("4", fragments[2]));
    assert_eq!(
        got[3],
        json!({"id": "5", "data": {"type": "tool_call", "call_id": "call_model_1",
            "name": "read_document", "partial": false,
            "arguments": {"document_id": doc, "max_length": 20}}})
    );
    assert_eq!(got[4]["data"]["type"], "tool_result");
    assert_eq!(got[4]["data"]["result"]["success"], true, "{}", got[4]);
    let read = got[4]["data"]["result"]["data"].clone();
    assert_eq!(got[5]["data"]["type"], "text_delta");
    assert_eq!(got[6]["data"]["type"], "done");
    assert_eq!(got[6]["data"]["steps"], 2);
    assert_eq!(got.len(), 7);

    let requests = model.requests();
    // With a space, the navigation tools are offered too.
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"list_sources"), "{offered:?}");
    let messages = requests[1]["messages"].as_array().unwrap();
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], "call_model_1");
    let fed_back: Value = serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(fed_back["data"], read);

    // The call is in the audit log under the model's id.
    w.state.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let (tool, success): (String, bool) =
        sqlx::query_as("SELECT tool, success FROM tool_calls WHERE call_id = 'call_model_1'")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    assert_eq!((tool.as_str(), success), ("read_document", true));
}

#[tokio::test]
async fn with_tool_search_the_model_discovers_and_runs_a_real_tool() {
    let w = world().await;
    let model = FakeModel::start().await;
    let search = json!({ "query": "search passages by meaning" }).to_string();
    let arguments = json!({ "query": "reclaiming storage", "mode": "vector", "limit": 3 });
    let execute = json!({ "name": "search_documents", "arguments": arguments }).to_string();
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_model_search",
        name: "search_tools",
        fragments: &[&search],
    }]));
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_model_run",
        name: "execute_tool",
        fragments: &[&execute],
    }]));
    model.push(text_reply(&["VACUUM reclaims storage."]));
    let base = w.server_with(model.base_url()).await;
    let r = post_chat(
        &base,
        &w.alice(),
        &json!({
            "messages": [user("what does vacuum do?")],
            "spaceId": w.alpha,
            "options": { "toolSearch": true },
        }),
    )
    .await;
    let events = events_of(r).await;
    let got = redacted(&events);

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["search_tools", "describe_tool", "execute_tool"]);
    assert_eq!(requests[2]["tools"], requests[0]["tools"]);

    // Whole calls and results, in order: the search, then the real tool
    // under the model's execute_tool call id.
    let whole: Vec<&Value> = got
        .iter()
        .map(|e| &e["data"])
        .filter(|d| d["type"] == "tool_result" || d["partial"] == false)
        .collect();
    assert_eq!(whole.len(), 4, "{got:?}");
    assert_eq!(whole[0]["name"], "search_tools");
    assert_eq!(whole[1]["name"], "search_tools");
    assert_eq!(
        whole[1]["result"]["data"]["tools"][0]["name"],
        "search_documents"
    );
    assert_eq!(
        whole[2],
        &json!({"type": "tool_call", "call_id": "call_model_run",
            "name": "search_documents", "partial": false, "arguments": arguments})
    );
    assert_eq!(whole[3]["name"], "search_documents");
    assert_eq!(whole[3]["call_id"], "call_model_run");
    let result = &whole[3]["result"];
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["tool"], "search_documents");
    assert_eq!(
        result["data"]["results"][0]["path"], "guides/vacuum.md",
        "{result}"
    );
    let done = &got.last().unwrap()["data"];
    assert_eq!(done["type"], "done");
    assert_eq!(done["steps"], 3);

    // The model reads the tool's result under its own call id.
    let messages = requests[2]["messages"].as_array().unwrap();
    let fed_back: Vec<Value> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(fed_back.len(), 2);
    assert_eq!(fed_back[1]["data"], result["data"]);

    // The audit log holds each call once, the run under the real tool's name.
    w.state.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT call_id, tool FROM tool_calls WHERE call_id LIKE 'call_model_%' ORDER BY call_id",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    let rows: Vec<(&str, &str)> = rows
        .iter()
        .map(|(id, tool)| (id.as_str(), tool.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            ("call_model_run", "search_documents"),
            ("call_model_search", "search_tools"),
        ]
    );
}

#[tokio::test]
async fn model_failures_end_the_stream_with_an_error_event() {
    let w = world().await;
    let text = |t: &str| Piece::Chunk(chunk(json!({"content": t}), None));
    let cases: Vec<(&str, Option<Reply>, &str)> = vec![
        ("down", None, "model_unreachable"),
        (
            "500",
            Some(Reply::Status {
                status: 500,
                body: r#"{"error":{"message":"The server had an error"}}"#.into(),
            }),
            "model_error",
        ),
        (
            "garbage",
            Some(Reply::Stream(vec![Piece::Bytes(
                "data: <html>oops\n\n".into(),
            )])),
            "model_bad_response",
        ),
        (
            "stalls",
            Some(Reply::Stream(vec![text("a"), Piece::Hang])),
            "model_timeout",
        ),
    ];
    for (case, reply, code) in cases {
        let model = FakeModel::start().await;
        let url = match reply {
            Some(reply) => {
                model.push(reply);
                model.base_url()
            }
            None => unused_base_url().await,
        };
        let base = w.server_with(url).await;
        let r = post_chat(&base, &w.alice(), &json!({ "messages": [user("hi")] })).await;
        let events = events_of(r).await;
        let (_, kind, last) = events.last().unwrap();
        assert_eq!(kind, "error", "{case}: {events:?}");
        assert_eq!(last["code"], code, "{case}: {last}");
        assert!(!last["message"].as_str().unwrap().is_empty());
        assert!(
            !last["message"].as_str().unwrap().contains("127.0.0.1"),
            "{case}: the endpoint's address stays in the log"
        );
        assert!(events.iter().all(|(_, k, _)| k != "done"), "{case}");
    }
}

#[tokio::test]
async fn without_a_model_chat_answers_503_and_the_rest_works() {
    let w = world().await;
    let base = common::serve(w.state.clone()).await;
    let (status, body) =
        json_of(post_chat(&base, &w.alice(), &json!({ "messages": [user("hi")] })).await).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"]["code"], "no_model");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("DATA_PLANE_MODEL")
    );
    let tools = reqwest::Client::new()
        .get(format!("{base}/v1/tools"))
        .bearer_auth(w.alice())
        .send()
        .await
        .unwrap();
    assert_eq!(tools.status(), StatusCode::OK);
}

#[tokio::test]
async fn bad_requests_answer_json_errors() {
    let w = world().await;
    let model = FakeModel::start().await;
    let base = w.server_with(model.base_url()).await;
    let token = w.alice();
    let check = |body: Value, token: Option<String>, status: StatusCode, fragment: &'static str| {
        let base = base.clone();
        async move {
            let mut request = reqwest::Client::new()
                .post(format!("{base}/v1/chat"))
                .json(&body);
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let (got, error) = json_of(request.send().await.unwrap()).await;
            assert_eq!(got, status, "{body}: {error}");
            let text = error["error"].to_string();
            assert!(text.contains(fragment), "{body}: {text} lacks {fragment:?}");
        }
    };
    let hi = json!([user("hi")]);
    check(
        json!({"messages": hi}),
        None,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    check(
        json!({"messages": hi}),
        Some("not-a-token".into()),
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    let t = || Some(token.clone());
    let bad = StatusCode::BAD_REQUEST;
    check(json!({"messages": []}), t(), bad, "at least one message").await;
    check(json!({}), t(), bad, "messages").await;
    check(json!({"messages": hi, "stream": true}), t(), bad, "stream").await;
    check(
        json!({"messages": [{"role": "wizard", "content": "x"}]}),
        t(),
        bad,
        "messages",
    )
    .await;
    check(
        json!({"messages": hi, "options": {"maxSteps": 0}}),
        t(),
        bad,
        "maxSteps",
    )
    .await;
    check(
        json!({"messages": hi, "options": {"temperature": 7}}),
        t(),
        bad,
        "temperature",
    )
    .await;
    check(
        json!({"messages": hi, "options": {"maxTokens": 0}}),
        t(),
        bad,
        "maxTokens",
    )
    .await;
    check(
        json!({"messages": hi, "options": {"deadlineSecs": 0}}),
        t(),
        bad,
        "deadlineSecs",
    )
    .await;
    check(
        json!({"messages": hi, "options": {"turbo": 1}}),
        t(),
        bad,
        "turbo",
    )
    .await;
    check(
        json!({"messages": hi, "spaceId": "nope"}),
        t(),
        bad,
        "spaceId",
    )
    .await;
    check(
        json!({"messages": hi, "spaceId": w.beta}),
        t(),
        StatusCode::NOT_FOUND,
        "space",
    )
    .await;
    assert!(model.requests().is_empty(), "no request reached the model");
}

#[tokio::test]
async fn a_client_that_hangs_up_cancels_the_model_and_every_later_tool_after_the_grace_period() {
    let w = world().await;
    let model = FakeModel::start().await;
    let doc = w.doc.to_string();
    let first_args = format!("{{\"document_id\": \"{doc}\"}}");
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_model_first",
        name: "document_info",
        fragments: &[&first_args],
    }]));
    // The second answer starts, then the model keeps thinking.
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(
            json!({"role": "assistant", "content": "Reading"}),
            None,
        )),
        Piece::Hang,
    ]));
    // What the model would have asked for next, had the client stayed.
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_model_later",
        name: "document_info",
        fragments: &[&first_args],
    }]));
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.idle_timeout = Duration::from_secs(30);
    let grace = Duration::from_millis(600);
    let runs = data_plane_runs::RunsConfig {
        grace,
        ..Default::default()
    };
    let base = common::serve(w.state.clone().with_runs(runs).with_agent(config).unwrap()).await;
    let r = post_chat(
        &base,
        &w.alice(),
        &json!({ "messages": [user("describe the guide")] }),
    )
    .await;
    let run_id = r.headers()["x-run-id"].to_str().unwrap().to_string();
    let mut stream = eventsource_stream::EventStream::new(r.bytes_stream());
    loop {
        let event = stream.next().await.unwrap().unwrap();
        if event.event == "text_delta" {
            break;
        }
    }
    drop(stream);
    let gone = std::time::Instant::now();

    assert!(
        model.wait_dropped(1, Duration::from_secs(5)).await,
        "the model's connection was closed"
    );
    assert!(
        gone.elapsed() >= grace,
        "the run went on for its grace period first"
    );
    let run = run_when(&base, &w.alice(), &run_id, |run| run["status"] != "running").await;
    assert_eq!(run["status"], "abandoned", "{run}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        model.requests().len(),
        2,
        "no model request after the hang-up"
    );
    // Configured without a key: none is sent.
    assert_eq!(model.authorizations(), ["", ""]);
    w.state.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let calls: Vec<String> = sqlx::query_scalar("SELECT call_id FROM tool_calls ORDER BY ts")
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    assert_eq!(calls, ["call_model_first"]);
}

#[tokio::test]
async fn a_client_that_reads_nothing_holds_up_no_other_stream() {
    let w = world().await;
    let model = FakeModel::start().await;
    // A long answer for a client that never reads it...
    let long: Vec<String> = (0..5000)
        .map(|i| format!("word {i} of a long answer; "))
        .collect();
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    model.push(text_reply(&long));
    let base = w.server_with(model.base_url()).await;
    let stuck = post_chat(&base, &w.alice(), &json!({ "messages": [user("talk")] })).await;
    assert_eq!(stuck.status(), StatusCode::OK);
    assert!(model.wait_requests(1, Duration::from_secs(5)).await);
    // ...then a short one for a client that does.
    model.push(text_reply(&["short"]));
    let started = std::time::Instant::now();
    let events =
        events_of(post_chat(&base, &w.alice(), &json!({ "messages": [user("hi")] })).await).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let kinds: Vec<&str> = events.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["text_delta", "done"]);
    // The unread stream's run goes on without its reader; what it sends is
    // recorded (memory holds a bounded ring), and can be read later, whole.
    let run_id = stuck.headers()["x-run-id"].to_str().unwrap().to_string();
    let client = reqwest::Client::new();
    let run = run_when(&base, &w.alice(), &run_id, |run| run["status"] == "done").await;
    assert_eq!(run["last_event_id"], 5002, "run, 5000 deltas, done");
    let replay = client
        .get(format!("{base}/v1/runs/{run_id}/events"))
        .bearer_auth(w.alice())
        .header("last-event-id", "4990")
        .send()
        .await
        .unwrap();
    let mut stream = eventsource_stream::EventStream::new(replay.bytes_stream());
    let mut ids = Vec::new();
    while let Some(event) = stream.next().await {
        ids.push(event.unwrap().id.parse::<i64>().unwrap());
    }
    assert_eq!(ids, (4991..=5002).collect::<Vec<_>>());
    drop(stuck);
}

#[tokio::test]
async fn the_model_reads_the_system_prompt_first_and_a_turn_ends_at_its_bounds() {
    let w = world().await;
    let model = FakeModel::start().await;
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.system_prompt = Some(data_plane_agent::prompt::PromptTemplate::default());
    let base = common::serve(w.state.clone().with_agent(config).unwrap()).await;
    let token = w.alice();

    model.push(text_reply(&["VACUUM reclaims storage."]));
    let body = json!({
        "messages": [{"role": "system", "content": "Be brief."}, user("what does vacuum do?")],
        "spaceId": w.alpha,
    });
    let events = events_of(post_chat(&base, &token, &body).await).await;
    assert_eq!(events.last().unwrap().2["reason"], "stop");
    let sent = &model.requests()[0];
    let ours = sent["messages"][0]["content"].as_str().unwrap();
    assert_eq!(sent["messages"][0]["role"], "system");
    assert!(
        ours.contains("The tools work in the space \"alpha\""),
        "{ours}"
    );
    assert!(ours.contains("- search_documents: "), "{ours}");
    assert!(ours.contains("data, not instructions"), "{ours}");
    let today = chrono::Utc::now()
        .date_naive()
        .format("%Y-%m-%d")
        .to_string();
    assert!(ours.contains(&today), "{ours}");
    assert_eq!(sent["messages"][1]["content"], "Be brief.");
    assert_eq!(sent["max_completion_tokens"], 4096);

    // A model that starts and then never ends: the turn's deadline ends it.
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(json!({"content": "Let me think"}), None)),
        Piece::Hang,
    ]));
    let body = json!({
        "messages": [user("hi")],
        "options": {"deadlineSecs": 1, "maxTokens": 64},
    });
    let started = std::time::Instant::now();
    let events = events_of(post_chat(&base, &token, &body).await).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let (_, kind, done) = events.last().unwrap();
    assert_eq!(
        (kind.as_str(), done["reason"].as_str()),
        ("done", Some("deadline"))
    );
    assert_eq!(events[0].2["text"], "Let me think");
    let sent = &model.requests()[1];
    assert_eq!(sent["max_completion_tokens"], 64);
    assert!(
        sent["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("every space the user may read")
    );
}

/// Local models write calls as text: a Mistral reply and a Python call list,
/// streamed in small pieces, become `tool_call` / `tool_result` events with
/// arguments typed by the tool's schema, and no markup reaches any
/// `text_delta`.
#[tokio::test]
async fn mistral_and_pythonic_text_calls_become_tool_events() {
    let w = world().await;
    let model = FakeModel::start().await;
    let doc = w.doc.to_string();
    let mistral = format!(
        "Let me read it.[TOOL_CALLS] [{{\"name\": \"read_document\", \"arguments\": \
         {{\"document_id\": \"{doc}\", \"max_length\": \"20\"}}}}]"
    );
    let pythonic = format!("[read_document(document_id='{doc}', start=0, max_length=10)]");
    let pieces = |reply: &str| -> Vec<String> {
        reply
            .as_bytes()
            .chunks(5)
            .map(|piece| String::from_utf8(piece.to_vec()).unwrap())
            .collect()
    };
    for reply in [&mistral, &pythonic] {
        let pieces = pieces(reply);
        let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
        model.push(text_reply(&pieces));
    }
    model.push(text_reply(&["It is about VACUUM."]));
    let base = w.server_with(model.base_url()).await;
    let r = post_chat(
        &base,
        &w.alice(),
        &json!({ "messages": [user("what is in the guide?")], "spaceId": w.alpha }),
    )
    .await;
    let events = events_of(r).await;
    let got = redacted(&events);
    let of_type = |kind: &str| -> Vec<Value> {
        got.iter()
            .filter(|e| e["data"]["type"] == kind)
            .map(|e| e["data"].clone())
            .collect()
    };
    let calls = of_type("tool_call");
    assert_eq!(calls.len(), 2, "{got:?}");
    assert_eq!(calls[0]["name"], "read_document");
    assert_eq!(
        calls[0]["arguments"],
        json!({"document_id": doc, "max_length": 20})
    );
    assert_eq!(
        calls[1]["arguments"],
        json!({"document_id": doc, "start": 0, "max_length": 10})
    );
    let results = of_type("tool_result");
    assert_eq!(results.len(), 2, "{got:?}");
    assert!(
        results.iter().all(|r| r["result"]["success"] == true),
        "{results:?}"
    );
    let text: String = of_type("text_delta")
        .iter()
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "Let me read it.It is about VACUUM.");
    for markup in ["[TOOL_CALLS]", "read_document", "{", "["] {
        assert!(!text.contains(markup), "{markup} in {text:?}");
    }
    assert_eq!(of_type("done")[0]["steps"], 3);
    // The results went back to the model framed as untrusted.
    let messages = model.requests()[1]["messages"].clone();
    let fed_back: Value = serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
    assert!(
        fed_back["notice"].as_str().unwrap().contains("untrusted"),
        "{fed_back}"
    );
}

/// `options.agent` picks the profile: the model is offered its tools (what
/// `GET /v1/tools?agent=` lists), a call outside it is refused and the
/// refusal goes back to the model, the audit names the profile, and an
/// unknown profile is a 400 naming the known ones.
#[tokio::test]
async fn the_agent_profile_chooses_the_tools_the_model_is_offered() {
    let w = world().await;
    let model = FakeModel::start().await;
    let base = w.server_with(model.base_url()).await;
    let names = |tools: &Value| -> Vec<String> {
        tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let listed = |agent: &str| {
        let base = base.clone();
        let token = w.alice();
        let space = w.alpha;
        let agent = agent.to_string();
        async move {
            reqwest::Client::new()
                .get(format!("{base}/v1/tools?agent={agent}&spaceId={space}"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
        }
    };

    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_outside",
        name: "grep_documents",
        fragments: &["{\"pattern\": \"VACUUM\"}"],
    }]));
    model.push(text_reply(&["Not with these tools."]));
    let r = post_chat(
        &base,
        &w.alice(),
        &json!({ "messages": [user("grep it")], "spaceId": w.alpha,
                 "options": { "agent": "explore" } }),
    )
    .await;
    let events = events_of(r).await;
    let result = events
        .iter()
        .find(|(_, kind, _)| kind == "tool_result")
        .map(|(_, _, body)| body["result"].clone())
        .unwrap();
    assert_eq!(result["success"], false);
    assert_eq!(result["error"]["code"], "not_available");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("this agent may not use it")
    );
    let requests = model.requests();
    let offered = names(&requests[0]["tools"]);
    assert_eq!(
        offered,
        [
            "document_info",
            "find_by_name",
            "folder_tree",
            "list_folder_contents",
            "list_sources",
            "read_document",
            "search_documents"
        ]
    );
    let explore: Value = listed("explore").await.json().await.unwrap();
    assert_eq!(explore["agent"], "explore");
    assert_eq!(requests[0]["tools"], explore["tools"]);
    // The default profile, chat, offers more; it is also the list's default
    // for a person.
    let chat: Value = listed("chat").await.json().await.unwrap();
    assert!(names(&chat["tools"]).contains(&"grep_documents".to_string()));
    assert!(names(&chat["tools"]).contains(&"analyze_document".to_string()));

    w.state.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let agent: Option<String> =
        sqlx::query_scalar("SELECT agent FROM tool_calls WHERE call_id = 'call_outside'")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    assert_eq!(agent.as_deref(), Some("explore"));

    let (status, error) = json_of(
        post_chat(
            &base,
            &w.alice(),
            &json!({ "messages": [user("hi")], "options": { "agent": "nope" } }),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("options.agent"), "{message}");
    // A person is offered the profiles a person may choose, and no other.
    assert!(
        message.ends_with("unknown agent profile \"nope\"; choose one of chat, explore"),
        "{message}"
    );
    let (status, error) = json_of(listed("nope").await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    // Profiles made for other doors cannot be taken by a chat.
    for other in ["service", "analyze_document"] {
        let (status, error) = json_of(
            post_chat(
                &base,
                &w.alice(),
                &json!({ "messages": [user("hi")], "options": { "agent": other } }),
            )
            .await,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{other}: {error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("is not for people; choose one of chat, explore"),
            "{message}"
        );
    }
    let (status, _) = json_of(
        post_chat(
            &base,
            &w.alice(),
            &json!({ "messages": [user("hi")], "options": { "toolMode": "smoke" } }),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn in_tags_mode_a_tag_line_runs_the_tool_and_stays_out_of_the_text() {
    let w = world().await;
    let model = FakeModel::start().await;
    let reply = "Searching the notes.\nSEARCH: dead tuples\n";
    let pieces: Vec<&str> = (0..reply.len())
        .step_by(3)
        .map(|i| &reply[i..(i + 3).min(reply.len())])
        .collect();
    model.push(text_reply(&pieces));
    model.push(text_reply(&["VACUUM reclaims their storage."]));
    let base = w.server_with(model.base_url()).await;
    let r = post_chat(
        &base,
        &w.alice(),
        &json!({
            "messages": [user("what does vacuum do?")],
            "spaceId": w.alpha,
            "options": { "toolMode": "tags" }
        }),
    )
    .await;
    let events = events_of(r).await;
    let got = redacted(&events);
    let types: Vec<&str> = got
        .iter()
        .map(|e| e["data"]["type"].as_str().unwrap())
        .filter(|t| *t != "text_delta")
        .collect();
    assert_eq!(types, ["tool_call", "tool_result", "done"], "{got:?}");
    let call = got
        .iter()
        .find(|e| e["data"]["type"] == "tool_call")
        .unwrap();
    assert_eq!(call["data"]["name"], "search_documents");
    assert_eq!(call["data"]["arguments"], json!({ "query": "dead tuples" }));
    let result = got
        .iter()
        .find(|e| e["data"]["type"] == "tool_result")
        .unwrap();
    assert_eq!(result["data"]["result"]["success"], true, "{result}");
    let text: String = got
        .iter()
        .filter(|e| e["data"]["type"] == "text_delta")
        .map(|e| e["data"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "Searching the notes.VACUUM reclaims their storage.");

    let requests = model.requests();
    assert!(requests[0].get("tools").is_none(), "{}", requests[0]);
    let system: Vec<&str> = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        system.iter().any(|s| s.contains(
            "SEARCH: <query> — hybrid, vector or keyword search over passages — e.g. SEARCH: vacuum full"
        )),
        "{system:?}"
    );
    let messages = requests[1]["messages"].as_array().unwrap();
    let last = &messages[messages.len() - 1];
    assert_eq!(last["role"], "user");
    let fed_back = last["content"].as_str().unwrap();
    let body = fed_back
        .strip_prefix("Results of SEARCH: dead tuples:\n")
        .unwrap_or_else(|| panic!("{fed_back}"));
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["data"], result["data"]["result"]["data"]);
    let assistant = &messages[messages.len() - 2];
    assert_eq!(
        assistant["content"],
        "Searching the notes.\nSEARCH: dead tuples"
    );
}

/// The answer cites a search hit by its number: the model read the number
/// in the tool's result, and the stream carries a `citation` event right
/// after the text that completed the marker (here split across two
/// deltas), naming the passage; a number the tools never gave, and a
/// second mention, cite nothing.
#[tokio::test]
async fn an_answer_citing_a_passage_by_its_number_streams_a_citation() {
    let w = world().await;
    let model = FakeModel::start().await;
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.system_prompt = Some(data_plane_agent::prompt::PromptTemplate::default());
    let base = common::serve(w.state.clone().with_agent(config).unwrap()).await;
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_model_s",
        name: "search_documents",
        fragments: &["{\"query\": \"reclaim storage dead tuples\"}"],
    }]));
    model.push(text_reply(&[
        "VACUUM reclaims storage [",
        "1]. It is cheap [1][9].",
    ]));
    let body = json!({"messages": [user("what does vacuum do?")], "spaceId": w.alpha});
    let events = events_of(post_chat(&base, &w.alice(), &body).await).await;
    let kinds: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(
        kinds[kinds.len() - 4..],
        ["text_delta", "text_delta", "citation", "done"],
        "{kinds:?}"
    );
    let citation = &events[kinds.len() - 2].2;
    let hit =
        &events.iter().find(|e| e.1 == "tool_result").unwrap().2["result"]["data"]["results"][0];
    assert_eq!(
        citation,
        &json!({
            "type": "citation",
            "index": 1,
            "document_id": w.doc,
            "path": "guides/vacuum.md",
            "title": hit["heading"],
            "char_start": hit["char_start"],
            "char_end": hit["char_end"],
            "text": hit["text"],
            "tool": "search_documents",
            "call_id": "call_model_s",
        })
    );
    assert!(
        hit["text"].as_str().unwrap().contains("VACUUM reclaims"),
        "{hit}"
    );
    // The model read the number it cited by.
    let messages = model.requests()[1]["messages"].as_array().unwrap().clone();
    let fed_back: Value =
        serde_json::from_str(messages.last().unwrap()["content"].as_str().unwrap()).unwrap();
    assert_eq!(fed_back["data"]["results"][0]["cite"], 1);
    // And the prompt told it how to cite.
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("carries a `cite` number")
    );
}
