//! Chat turns as runs, against real servers on 127.0.0.1, PostgreSQL and a
//! fake model: resume after a disconnect with `Last-Event-ID` (every event
//! once, in order), on a second server process sharing the database; the
//! grace period; stop during a tool and during a sub-agent; approvals
//! (fetch_web_page's default, the admin's rules, inside analyze_document's
//! sub-agent, answered from the other process, denied, remembered for the
//! conversation, expired); and that a run is its user's alone.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use data_plane::auth::JwtKeys;
use data_plane::state::AppState;
use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{
    FakeModel, Piece, Reply, ScriptedCall, chunk, text_reply, tool_calls_reply,
};
use data_plane_handlers::{ModelSettings, SubAgentLimits};
use data_plane_runs::RunsConfig;
use data_plane_store::Scope;
use data_plane_store::identity::{self, Permission};
use data_plane_store::testing::TestDatabase;
use futures::StreamExt;
use serde_json::{Value, json};
use uuid::Uuid;

/// The monitoring's service token, for `/metrics`.
const MONITOR: &str = "monitor-token-0123456789abcdef";

struct World {
    test: TestDatabase,
    jwt: JwtKeys,
    alice: Uuid,
    bob: Uuid,
    admin: Uuid,
    alpha: Uuid,
    doc: Uuid,
}

async fn world() -> World {
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let alice = identity::upsert_user(&mut tx, "alice@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let bob = identity::upsert_user(&mut tx, "bob@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let admin = identity::upsert_user(&mut tx, "admin@example.com", Some(Permission::Admin))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let (alpha, doc) = common::space_with_guide(&db, "alpha", &[alice, bob]).await;
    World {
        test,
        jwt: common::jwt(),
        alice,
        bob,
        admin,
        alpha,
        doc,
    }
}

impl World {
    fn token(&self, user: Uuid, permission: Permission) -> String {
        self.jwt
            .issue(
                user,
                "someone@example.com",
                permission,
                Duration::from_secs(600),
            )
            .unwrap()
    }

    fn alice(&self) -> String {
        self.token(self.alice, Permission::User)
    }

    /// A server whose chat model (and sub-agent model) is `model`, with the
    /// monitoring's service token.
    fn state(&self, model: &FakeModel, runs: RunsConfig) -> AppState {
        self.state_gated(model, runs, None)
    }

    /// [`World::state`] with `gate` before every gated call.
    fn state_gated(
        &self,
        model: &FakeModel,
        runs: RunsConfig,
        gate: Option<Arc<dyn data_plane_registry::Gate>>,
    ) -> AppState {
        let mut state = common::state_with(
            self.test.db.clone(),
            common::embedder(),
            self.jwt.clone(),
            data_plane::auth::ServiceTokens::parse(&format!("monitor={MONITOR}")).unwrap(),
            data_plane_web::search::WebSearch::default(),
        );
        if let Some(gate) = gate {
            state = state.with_gate(gate).unwrap();
        }
        let mut config = AgentConfig::new(model.base_url(), "test-model");
        config.idle_timeout = Duration::from_secs(30);
        state.connect_model(ModelSettings {
            agent: config.clone(),
            sub_agent: SubAgentLimits::default(),
        });
        state.with_runs(runs).with_agent(config).unwrap()
    }

    async fn server(&self, model: &FakeModel, runs: RunsConfig) -> String {
        common::serve(self.state(model, runs)).await
    }

    /// Changes run-time settings as an admin.
    async fn settings(&self, base: &str, changes: Value) {
        let r = reqwest::Client::new()
            .put(format!("{base}/v1/admin/settings"))
            .bearer_auth(self.token(self.admin, Permission::Admin))
            .json(&changes)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }
}

fn user(text: &str) -> Value {
    json!({ "role": "user", "content": text })
}

/// One event as read: id, type, body.
type Seen = (i64, String, Value);

/// An open event stream, read with a real SSE parser.
struct Events {
    stream: std::pin::Pin<Box<dyn futures::Stream<Item = Seen> + Send>>,
    run_id: Option<String>,
}

impl Events {
    fn of(r: reqwest::Response) -> Events {
        assert_eq!(r.status(), 200);
        let run_id = r
            .headers()
            .get("x-run-id")
            .map(|v| v.to_str().unwrap().to_string());
        let stream = eventsource_stream::EventStream::new(r.bytes_stream()).map(|e| {
            let e = e.unwrap();
            let data: Value = serde_json::from_str(&e.data).unwrap();
            assert_eq!(data["type"], e.event.as_str());
            (e.id.parse::<i64>().unwrap(), e.event, data)
        });
        Events {
            stream: Box::pin(stream),
            run_id,
        }
    }

    async fn next(&mut self) -> Option<Seen> {
        tokio::time::timeout(Duration::from_secs(20), self.stream.next())
            .await
            .expect("an event within 20 s")
    }

    /// Events up to and including the first of `kind`.
    async fn until(&mut self, kind: &str) -> Vec<Seen> {
        let mut seen = Vec::new();
        loop {
            let event = self
                .next()
                .await
                .unwrap_or_else(|| panic!("the stream ended before a {kind} event: {seen:?}"));
            let found = event.1 == kind;
            seen.push(event);
            if found {
                return seen;
            }
        }
    }

    /// The rest of the stream.
    async fn rest(&mut self) -> Vec<Seen> {
        let mut seen = Vec::new();
        while let Some(event) = self.next().await {
            seen.push(event);
        }
        seen
    }
}

async fn chat(base: &str, token: &str, body: Value) -> Events {
    Events::of(
        reqwest::Client::new()
            .post(format!("{base}/v1/chat"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
}

async fn resume(base: &str, token: &str, run_id: &str, last: Option<i64>) -> Events {
    let mut request = reqwest::Client::new()
        .get(format!("{base}/v1/runs/{run_id}/events"))
        .bearer_auth(token);
    if let Some(last) = last {
        request = request.header("last-event-id", last.to_string());
    }
    Events::of(request.send().await.unwrap())
}

async fn post(url: &str, token: &str, body: Value) -> (u16, Value) {
    common::json(
        reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn get(url: &str, token: &str) -> (u16, Value) {
    common::json(
        reqwest::Client::new()
            .get(url)
            .bearer_auth(token)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn kinds(events: &[Seen]) -> Vec<&str> {
    events.iter().map(|(_, k, _)| k.as_str()).collect()
}

fn ids(events: &[Seen]) -> Vec<i64> {
    events.iter().map(|(id, _, _)| *id).collect()
}

/// A reply that streams `n` words with a pause between them.
fn slow_text(n: usize, pause: Duration) -> Reply {
    let mut pieces = vec![Piece::Chunk(chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    ))];
    for i in 0..n {
        pieces.push(Piece::Chunk(chunk(
            json!({"content": format!("w{i} ")}),
            None,
        )));
        pieces.push(Piece::Pause(pause));
    }
    pieces.push(Piece::Chunk(chunk(json!({}), Some("stop"))));
    pieces.push(Piece::Done);
    Reply::Stream(pieces)
}

fn call(id: &'static str, name: &'static str, args: &str) -> Reply {
    let args: &'static str = Box::leak(args.to_string().into_boxed_str());
    let fragments: &'static [&'static str] = Box::leak(vec![args].into_boxed_slice());
    tool_calls_reply(&[ScriptedCall {
        id,
        name,
        fragments,
    }])
}

#[tokio::test]
async fn a_reader_that_drops_mid_answer_resumes_with_last_event_id_and_misses_nothing() {
    let w = world().await;
    let model = FakeModel::start().await;
    model.push(call(
        "call_model_info",
        "document_info",
        &format!(r#"{{"document_id":"{}"}}"#, w.doc),
    ));
    model.push(slow_text(30, Duration::from_millis(20)));
    let base = w.server(&model, RunsConfig::default()).await;
    let token = w.alice();
    let mut first = chat(&base, &token, json!({"messages": [user("describe it")]})).await;
    let run_id = first.run_id.clone().unwrap();
    // Into the streamed answer, then the connection drops.
    let mut got = first.until("text_delta").await;
    for _ in 0..5 {
        got.push(first.next().await.unwrap());
    }
    drop(first);
    assert_eq!(got[0].1, "run");
    assert_eq!(got[0].2["run_id"], run_id.as_str());
    let last = got.last().unwrap().0;
    // A new connection with the last id it saw: the rest, once each.
    let mut again = resume(&base, &token, &run_id, Some(last)).await;
    got.extend(again.rest().await);
    let expected_ids: Vec<i64> = (1..=got.len() as i64).collect();
    assert_eq!(ids(&got), expected_ids, "{:?}", kinds(&got));
    assert_eq!(got.last().unwrap().1, "done");
    assert_eq!(got.last().unwrap().2["reason"], "stop");
    let text: String = got
        .iter()
        .filter(|(_, k, _)| k == "text_delta")
        .map(|(_, _, d)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(text.split_whitespace().count(), 30, "{text}");
    // A replay from the start (`?after=0`) is the same stream.
    let r = reqwest::Client::new()
        .get(format!("{base}/v1/runs/{run_id}/events?after=0"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let replay = Events::of(r).rest().await;
    assert_eq!(replay, got);
    // Reconnecting after the last event (what EventSource does when a
    // stream closes) finds nothing more, and no made-up error.
    let after_end = resume(&base, &token, &run_id, Some(got.len() as i64))
        .await
        .rest()
        .await;
    assert_eq!(after_end, []);
    let (status, run) = get(&format!("{base}/v1/runs/{run_id}"), &token).await;
    assert_eq!(status, 200);
    assert_eq!(run["status"], "done");
    assert_eq!(run["last_event_id"], got.len());
    assert_eq!(run["conversation_id"], run_id.as_str());
    // A bad id is refused by name.
    let r = reqwest::Client::new()
        .get(format!("{base}/v1/runs/{run_id}/events"))
        .bearer_auth(&token)
        .header("last-event-id", "seven")
        .send()
        .await
        .unwrap();
    let (status, body) = common::json(r).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Last-Event-ID"),
        "{body}"
    );
}

/// PostgreSQL's jsonb holds no NUL: a model that writes one neither stops
/// the recorder nor makes the replay differ from what was sent.
#[tokio::test]
async fn a_nul_in_the_model_text_is_sent_and_replayed_alike() {
    let w = world().await;
    let model = FakeModel::start().await;
    model.push(text_reply(&["before\u{0}after", " and more"]));
    model.push(text_reply(&["next turn"]));
    let base = w.server(&model, RunsConfig::default()).await;
    let token = w.alice();
    let mut first = chat(&base, &token, json!({"messages": [user("hi")]})).await;
    let run_id = first.run_id.clone().unwrap();
    let live = first.rest().await;
    assert_eq!(live[1].2["text"], "before\u{FFFD}after");
    let replay = resume(&base, &token, &run_id, Some(0)).await.rest().await;
    assert_eq!(replay, live);
    // The recorder went on: the next run is recorded whole too.
    let mut second = chat(&base, &token, json!({"messages": [user("again")]})).await;
    let second_id = second.run_id.clone().unwrap();
    let live = second.rest().await;
    let replay = resume(&base, &token, &second_id, Some(0))
        .await
        .rest()
        .await;
    assert_eq!(replay, live);
}

/// The grace period runs from the last time the last reader went: an
/// earlier leave's timer does not stop a run that was read again since.
#[tokio::test]
async fn the_grace_period_counts_from_the_last_leave() {
    let w = world().await;
    let model = FakeModel::start().await;
    model.push(slow_text(80, Duration::from_millis(100)));
    let grace = Duration::from_secs(3);
    let base = w
        .server(
            &model,
            RunsConfig {
                grace,
                ..RunsConfig::default()
            },
        )
        .await;
    let token = w.alice();
    let mut first = chat(&base, &token, json!({"messages": [user("talk")]})).await;
    let run_id = first.run_id.clone().unwrap();
    let mut got = first.until("text_delta").await;
    drop(first);
    let left = std::time::Instant::now();
    // Back after 0.2 s, gone again after 2 s: an abandonment timed from
    // the first leave would come at 3 s.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut second = resume(&base, &token, &run_id, Some(got.last().unwrap().0)).await;
    while left.elapsed() < Duration::from_secs(2) {
        got.push(second.next().await.unwrap());
    }
    drop(second);
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let (_, run) = get(&format!("{base}/v1/runs/{run_id}"), &token).await;
    assert_eq!(
        run["status"],
        "running",
        "stopped {:?} after the first leave",
        left.elapsed()
    );
    let mut third = resume(&base, &token, &run_id, Some(got.last().unwrap().0)).await;
    got.extend(third.rest().await);
    assert_eq!(got.last().unwrap().2["reason"], "stop");
    let expected: Vec<i64> = (1..=got.len() as i64).collect();
    assert_eq!(ids(&got), expected);
}

#[tokio::test]
async fn a_run_is_its_users_alone() {
    let w = world().await;
    let model = FakeModel::start().await;
    model.push(text_reply(&["private"]));
    let base = w.server(&model, RunsConfig::default()).await;
    let mut events = chat(&base, &w.alice(), json!({"messages": [user("hi")]})).await;
    let run_id = events.run_id.clone().unwrap();
    events.rest().await;
    let bob = w.token(w.bob, Permission::User);
    for (status, body) in [
        get(&format!("{base}/v1/runs/{run_id}"), &bob).await,
        post(&format!("{base}/v1/runs/{run_id}/stop"), &bob, json!({})).await,
        post(
            &format!("{base}/v1/runs/{run_id}/approvals/call_x"),
            &bob,
            json!({"approved": true}),
        )
        .await,
    ] {
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["error"]["message"], format!("run {run_id} not found"));
    }
    let r = reqwest::Client::new()
        .get(format!("{base}/v1/runs/{run_id}/events"))
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // An admin reads it; its user stops it after the end: nothing to stop.
    let (status, run) = get(
        &format!("{base}/v1/runs/{run_id}"),
        &w.token(w.admin, Permission::Admin),
    )
    .await;
    assert_eq!((status, run["status"].as_str()), (200, Some("done")));
    let (status, stopped) = post(
        &format!("{base}/v1/runs/{run_id}/stop"),
        &w.alice(),
        json!({}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        stopped,
        json!({"run_id": run_id, "status": "done", "stopped": false})
    );
}

/// The denial, a remembered approval and a trusted host, over four turns.
#[tokio::test]
async fn fetch_web_page_asks_before_an_untrusted_host_and_remember_holds_for_the_conversation() {
    let w = world().await;
    let model = FakeModel::start().await;
    let base = w.server(&model, RunsConfig::default()).await;
    let token = w.alice();
    // A private address: the SSRF guard refuses it without connecting, after
    // the approval.
    let fetch = r#"{"url":"http://10.20.30.40/report?q=secret"}"#;

    // 1. Denied: the model reads the denial as the tool's result.
    model.push(call("call_model_f1", "fetch_web_page", fetch));
    model.push(text_reply(&["I was not allowed."]));
    let mut turn = chat(&base, &token, json!({"messages": [user("fetch it")]})).await;
    let run_id = turn.run_id.clone().unwrap();
    let seen = turn.until("approval_request").await;
    let conversation = seen[0].2["conversation_id"].as_str().unwrap().to_string();
    let asked = &seen.last().unwrap().2;
    assert_eq!(asked["call_id"], "call_model_f1");
    assert_eq!(asked["tool"], "fetch_web_page");
    assert_eq!(
        asked["arguments"]["url"],
        "http://10.20.30.40/report?q=secret"
    );
    assert_eq!(asked["annotations"]["open_world"], true);
    assert!(
        asked["why"].as_str().unwrap().contains("10.20.30.40"),
        "{asked}"
    );
    let (status, run) = get(&format!("{base}/v1/runs/{run_id}"), &token).await;
    assert_eq!(status, 200);
    assert_eq!(run["pending_approvals"][0]["call_id"], "call_model_f1");
    let url = format!("{base}/v1/runs/{run_id}/approvals/call_model_f1");
    let (status, body) = post(
        &url,
        &token,
        json!({"approved": false, "reason": "not that host"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "denied");
    let rest = turn.rest().await;
    assert_eq!(
        kinds(&rest),
        ["approval_result", "tool_result", "text_delta", "done"]
    );
    assert_eq!(rest[0].2["approved"], false);
    assert_eq!(rest[0].2["reason"], "not that host");
    let result = &rest[1].2["result"];
    assert_eq!(result["success"], false);
    assert_eq!(result["error"]["code"], "approval_required", "{result}");
    let fed_back = model.requests()[1]["messages"].to_string();
    assert!(
        fed_back.contains("was not approved: the user denied it: not that host"),
        "{fed_back}"
    );
    // Answered once: a second answer is a conflict.
    let (status, body) = post(&url, &token, json!({"approved": true})).await;
    assert_eq!(status, 409, "{body}");
    let (status, _) = post(
        &format!("{base}/v1/runs/{run_id}/approvals/call_unknown"),
        &token,
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 404);

    // 2. Approved with "remember" in the same conversation: the call runs
    // (and the guard refuses the private address).
    model.push(call("call_model_f2", "fetch_web_page", fetch));
    model.push(text_reply(&["Blocked anyway."]));
    let body = json!({"messages": [user("again")], "options": {"conversationId": conversation}});
    let mut turn = chat(&base, &token, body.clone()).await;
    let run2 = turn.run_id.clone().unwrap();
    turn.until("approval_request").await;
    let (status, _) = post(
        &format!("{base}/v1/runs/{run2}/approvals/call_model_f2"),
        &token,
        json!({"approved": true, "remember": true}),
    )
    .await;
    assert_eq!(status, 200);
    let rest = turn.rest().await;
    assert_eq!(rest[0].1, "approval_result");
    assert_eq!(rest[0].2["remember"], true);
    let result = &rest[1].2["result"];
    assert_eq!(result["error"]["code"], "invalid_arguments", "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("public internet"),
        "{result}"
    );

    // 3. The same conversation again: no question asked for that host...
    model.push(call("call_model_f3", "fetch_web_page", fetch));
    model.push(text_reply(&["Still blocked."]));
    let all = chat(&base, &token, body.clone()).await.rest().await;
    assert_eq!(
        kinds(&all),
        [
            "run",
            "tool_call",
            "tool_call",
            "tool_result",
            "text_delta",
            "done"
        ]
    );
    // ...but another host asks again: "remember" covers what was approved.
    model.push(call(
        "call_model_f3b",
        "fetch_web_page",
        r#"{"url":"http://10.20.30.41/"}"#,
    ));
    let mut turn = chat(&base, &token, body).await;
    let run3 = turn.run_id.clone().unwrap();
    let asked = turn.until("approval_request").await;
    assert!(
        asked.last().unwrap().2["why"]
            .as_str()
            .unwrap()
            .contains("10.20.30.41"),
        "{asked:?}"
    );
    let (status, _) = post(&format!("{base}/v1/runs/{run3}/stop"), &token, json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(kinds(&turn.rest().await), ["approval_result", "done"]);

    // 4. A trusted host asks nobody, in a new conversation too.
    w.settings(
        &base,
        json!({"fetch_web_page_trusted_hosts": ["*.internal.example", "10.20.30.40"]}),
    )
    .await;
    model.push(call("call_model_f4", "fetch_web_page", fetch));
    model.push(text_reply(&["Trusted."]));
    let all = chat(&base, &token, json!({"messages": [user("trusted")]}))
        .await
        .rest()
        .await;
    assert_eq!(
        kinds(&all),
        [
            "run",
            "tool_call",
            "tool_call",
            "tool_result",
            "text_delta",
            "done"
        ]
    );
    // executeTool is a service's own decision: it never asks.
    w.settings(&base, json!({"fetch_web_page_trusted_hosts": []}))
        .await;
    let (status, result) = post(
        &format!("{base}/v1/tools/fetch_web_page/execute"),
        &token,
        json!({"args": {"url": "http://10.20.30.40/"}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(result["error"]["code"], "invalid_arguments", "{result}");
}

/// A gate that asks is answered by the person of the chat run: approved,
/// the call runs; denied, the model reads the denial. The audit keeps the
/// gate's verdict either way.
#[tokio::test]
async fn a_gate_that_asks_is_answered_by_the_person_in_the_chat_run() {
    let w = world().await;
    let model = FakeModel::start().await;
    let gate = data_plane_registry::gate::PolicyGate::parse(
        "gate.json",
        &json!({ "rules": [{ "tools": ["fetch_web_page"], "effect": "ask",
                             "reason": "a person checks every page fetched" }] })
        .to_string(),
        &["analyze_document", "fetch_web_page", "web_search"],
    )
    .unwrap();
    let state = w.state_gated(&model, RunsConfig::default(), Some(Arc::new(gate)));
    let base = common::serve(state.clone()).await;
    let token = w.alice();
    // A private address: the SSRF guard refuses it once the call runs.
    let fetch = r#"{"url":"http://10.20.30.40/report"}"#;
    for (call_id, approved) in [("call_gate_yes", true), ("call_gate_no", false)] {
        model.push(call(call_id, "fetch_web_page", fetch));
        model.push(text_reply(&["Answered."]));
        let mut turn = chat(&base, &token, json!({"messages": [user("fetch it")]})).await;
        let run_id = turn.run_id.clone().unwrap();
        let asked = turn.until("approval_request").await;
        let asked = &asked.last().unwrap().2;
        assert_eq!(asked["call_id"], call_id);
        assert_eq!(
            asked["why"], "the gate asks: a person checks every page fetched",
            "{asked}"
        );
        let (status, body) = post(
            &format!("{base}/v1/runs/{run_id}/approvals/{call_id}"),
            &token,
            json!({"approved": approved, "reason": "checked"}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let rest = turn.rest().await;
        assert_eq!(
            kinds(&rest),
            ["approval_result", "tool_result", "text_delta", "done"]
        );
        assert_eq!(rest[0].2["approved"], approved);
        let result = &rest[1].2["result"];
        if approved {
            // It ran: the guard, past the gate and the person, refused the address.
            assert_eq!(result["error"]["code"], "invalid_arguments", "{result}");
            assert!(
                result["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("public internet"),
                "{result}"
            );
        } else {
            assert_eq!(result["error"]["code"], "approval_required", "{result}");
            assert!(
                result["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("was not approved"),
                "{result}"
            );
        }
    }
    state.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let rows: Vec<(String, Option<String>, bool)> = sqlx::query_as(
        "SELECT call_id, gate, success FROM tool_calls
          WHERE call_id LIKE 'call_gate_%' ORDER BY call_id",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    assert_eq!(
        rows,
        [
            ("call_gate_no".to_string(), Some("ask".to_string()), false),
            ("call_gate_yes".to_string(), Some("ask".to_string()), false),
        ]
    );
}

#[tokio::test]
async fn an_approval_inside_the_sub_agent_names_its_parent_call_and_an_unanswered_one_expires() {
    let w = world().await;
    let model = FakeModel::start().await;
    let runs = RunsConfig {
        approval_timeout: Duration::from_millis(700),
        ..RunsConfig::default()
    };
    let base = w.server(&model, runs).await;
    w.settings(&base, json!({"approvals": {"tools": ["read_document"]}}))
        .await;
    let token = w.alice();
    let doc = w.doc;
    model.push(call(
        "call_model_analyze",
        "analyze_document",
        &format!(r#"{{"document_id":"{doc}","question":"What does VACUUM do?"}}"#),
    ));
    // The sub-agent's own steps.
    model.push(call(
        "call_sub_read",
        "read_document",
        &format!(r#"{{"document_id":"{doc}"}}"#),
    ));
    model.push(text_reply(&["It reclaims storage."]));
    // The top-level answer.
    model.push(text_reply(&["VACUUM reclaims storage."]));
    let mut turn = chat(
        &base,
        &token,
        json!({"messages": [user("analyze")], "spaceId": w.alpha}),
    )
    .await;
    let run_id = turn.run_id.clone().unwrap();
    let seen = turn.until("approval_request").await;
    let asked = &seen.last().unwrap().2;
    assert_eq!(asked["call_id"], "call_sub_read");
    assert_eq!(asked["tool"], "read_document");
    assert_eq!(asked["parent_call_id"], "call_model_analyze");
    assert_eq!(asked["why"], "the approval rules name read_document");
    let (status, _) = post(
        &format!("{base}/v1/runs/{run_id}/approvals/call_sub_read"),
        &token,
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 200);
    let rest = turn.rest().await;
    assert_eq!(rest[0].1, "approval_result");
    assert_eq!(rest[0].2["parent_call_id"], "call_model_analyze");
    assert!(
        kinds(&rest).contains(&"subagent_tool_result"),
        "{:?}",
        kinds(&rest)
    );
    let sub_result = rest
        .iter()
        .find(|(_, k, _)| k == "subagent_tool_result")
        .unwrap();
    assert_eq!(sub_result.2["result"]["success"], true, "{:?}", sub_result);
    assert_eq!(rest.last().unwrap().1, "done");

    // Nobody answers: after the timeout it is a denial the model reads.
    model.push(call(
        "call_model_read",
        "read_document",
        &format!(r#"{{"document_id":"{doc}"}}"#),
    ));
    model.push(text_reply(&["Nobody answered."]));
    let all = chat(
        &base,
        &token,
        json!({"messages": [user("read")], "spaceId": w.alpha}),
    )
    .await
    .rest()
    .await;
    assert_eq!(
        kinds(&all),
        [
            "run",
            "tool_call",
            "tool_call",
            "approval_request",
            "approval_result",
            "tool_result",
            "text_delta",
            "done"
        ]
    );
    assert_eq!(all[4].2["status"], "expired");
    let result = &all[5].2["result"];
    assert_eq!(result["error"]["code"], "approval_required");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the approval expired"),
        "{result}"
    );
    // Late answers find it settled.
    let run2 = all[0].2["run_id"].as_str().unwrap();
    let (status, body) = post(
        &format!("{base}/v1/runs/{run2}/approvals/call_model_read"),
        &token,
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired")
    );
}

#[tokio::test]
async fn stop_ends_a_run_in_the_middle_of_a_sub_agent_and_of_a_waiting_call() {
    let w = world().await;
    let model = FakeModel::start().await;
    let base = w.server(&model, RunsConfig::default()).await;
    let token = w.alice();
    let doc = w.doc;
    model.push(call(
        "call_model_analyze",
        "analyze_document",
        &format!(r#"{{"document_id":"{doc}","question":"What does VACUUM do?"}}"#),
    ));
    // The sub-agent's model starts an answer and never finishes it.
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(
            json!({"role": "assistant", "content": "Thinking"}),
            None,
        )),
        Piece::Hang,
    ]));
    let mut turn = chat(
        &base,
        &token,
        json!({"messages": [user("analyze")], "spaceId": w.alpha}),
    )
    .await;
    let run_id = turn.run_id.clone().unwrap();
    turn.until("subagent_chunk").await;
    let started = std::time::Instant::now();
    let (status, body) = post(&format!("{base}/v1/runs/{run_id}/stop"), &token, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"run_id": run_id, "status": "stopped", "stopped": true})
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        model.wait_dropped(1, Duration::from_secs(5)).await,
        "the sub-agent's model request was closed"
    );
    let rest = turn.rest().await;
    assert_eq!(kinds(&rest), ["done"]);
    assert_eq!(rest[0].2["reason"], "stopped");
    assert_eq!(model.requests().len(), 2, "nothing asked after the stop");

    // A run waiting for an approval: stop settles it and ends the run.
    w.settings(&base, json!({"approvals": {"categories": ["document"]}}))
        .await;
    model.push(call(
        "call_model_info",
        "document_info",
        &format!(r#"{{"document_id":"{doc}"}}"#),
    ));
    let mut turn = chat(&base, &token, json!({"messages": [user("info")]})).await;
    let run_id = turn.run_id.clone().unwrap();
    turn.until("approval_request").await;
    // The monitoring sees the run and its waiting call.
    let shown = common::metrics(&base, MONITOR).await;
    assert!(
        shown.contains("data_plane_chat_runs_running 1\n"),
        "{shown}"
    );
    assert!(
        shown.contains("data_plane_chat_approvals_waiting 1\n"),
        "{shown}"
    );
    let (status, body) = post(&format!("{base}/v1/runs/{run_id}/stop"), &token, json!({})).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("stopped")));
    let rest = turn.rest().await;
    assert_eq!(kinds(&rest), ["approval_result", "done"]);
    let shown = common::metrics(&base, MONITOR).await;
    assert!(
        shown.contains("data_plane_chat_runs_running 0\n"),
        "{shown}"
    );
    assert!(
        shown.contains("data_plane_chat_approvals_waiting 0\n"),
        "{shown}"
    );
    assert_eq!(rest[0].2["status"], "expired");
    assert_eq!(rest[0].2["reason"], "the call was stopped before an answer");
    let (status, body) = post(
        &format!("{base}/v1/runs/{run_id}/approvals/call_model_info"),
        &token,
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    let (_, run) = get(&format!("{base}/v1/runs/{run_id}"), &token).await;
    assert_eq!(run["status"], "stopped");
    assert_eq!(run["pending_approvals"], json!([]));
}

/// A remote module whose one tool never answers; counts the calls whose
/// caller hung up.
struct Stalling {
    hung_up: std::sync::atomic::AtomicUsize,
}

/// The server's handle on it.
struct StallingHandler(Arc<Stalling>);

impl data_plane_testkit::http::Handler for StallingHandler {
    fn respond(
        &self,
        request: data_plane_testkit::http::Request,
    ) -> data_plane_testkit::http::Response {
        use data_plane_testkit::http::Response;
        let json = vec![("content-type".to_string(), "application/json".to_string())];
        if request.path.starts_with("/manifest") {
            let manifest = json!({
                "name": "slow",
                "tools": [{"name": "slow.wait", "description": "Waits for a long time."}]
            });
            return Response::whole(200, json, manifest.to_string());
        }
        let answer = json!({"success": true, "data": {"waited": true}});
        Response::Delayed(
            Duration::from_secs(120),
            Box::new(Response::whole(200, json, answer.to_string())),
        )
    }

    fn finished(&self, complete: bool) {
        if !complete {
            self.0
                .hung_up
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

#[tokio::test]
async fn stop_ends_a_run_in_the_middle_of_a_tool_call() {
    let w = world().await;
    let model = FakeModel::start().await;
    let stalling = Arc::new(Stalling {
        hung_up: std::sync::atomic::AtomicUsize::new(0),
    });
    let module = data_plane_testkit::http::Server::start(StallingHandler(stalling.clone())).await;
    let modules = data_plane_modules::ModulesConfig {
        modules: vec![data_plane_modules::ModuleConfig {
            name: "slow".into(),
            url: format!("http://{}", module.addr()),
            token: None,
            slow: true,
            timeout_ms: None,
        }],
        ..Default::default()
    };
    let state = w.state(&model, RunsConfig::default()).with_modules(modules);
    state.modules.start();
    let base = common::serve(state).await;
    let token = w.alice();
    model.push(call("call_model_wait", "slow__wait", "{}"));
    let mut turn = chat(&base, &token, json!({"messages": [user("wait")]})).await;
    let run_id = turn.run_id.clone().unwrap();
    let seen = turn.until("tool_call").await;
    // The complete call: the tool is running at the module.
    let mut seen = seen;
    while seen.last().unwrap().2["partial"] != false {
        seen.push(turn.next().await.unwrap());
    }
    assert_eq!(seen.last().unwrap().2["name"], "slow.wait");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, body) = post(&format!("{base}/v1/runs/{run_id}/stop"), &token, json!({})).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("stopped")),
        "{body}"
    );
    let rest = turn.rest().await;
    assert_eq!(kinds(&rest), ["done"], "no tool_result for a stopped call");
    assert_eq!(rest[0].2["reason"], "stopped");
    let hung_up = async {
        while stalling.hung_up.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), hung_up)
        .await
        .expect("the module's request was closed");
    assert_eq!(model.requests().len(), 1, "nothing asked after the stop");
}

#[tokio::test]
async fn a_run_is_resumed_and_its_approval_answered_on_another_server_process() {
    let w = world().await;
    let model = FakeModel::start().await;
    let base = w.server(&model, RunsConfig::default()).await;
    let data_dir = tempfile::tempdir().unwrap();
    // A second process over the same database, with no model of its own.
    let (_other, other) = common::second_server(&w.test, data_dir.path()).await;

    w.settings(&base, json!({"approvals": {"tools": ["document_info"]}}))
        .await;
    let token = w.alice();
    model.push(call(
        "call_model_info",
        "document_info",
        &format!(r#"{{"document_id":"{}"}}"#, w.doc),
    ));
    model.push(slow_text(10, Duration::from_millis(30)));
    let mut first = chat(&base, &token, json!({"messages": [user("info")]})).await;
    let run_id = first.run_id.clone().unwrap();
    let mut got = first.until("approval_request").await;
    drop(first);
    // The other process replays from the table and follows the run live.
    let last = got.last().unwrap().0;
    let mut there = resume(&other, &token, &run_id, Some(last - 1)).await;
    let (id, kind, _) = there.next().await.unwrap();
    assert_eq!((id, kind.as_str()), (last, "approval_request"));
    let (status, run) = get(&format!("{other}/v1/runs/{run_id}"), &token).await;
    assert_eq!(status, 200);
    assert_eq!(run["status"], "running");
    assert_eq!(run["pending_approvals"][0]["tool"], "document_info");
    // Answered on the other process; the run goes on where it runs.
    let (status, body) = post(
        &format!("{other}/v1/runs/{run_id}/approvals/call_model_info"),
        &token,
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let rest = there.rest().await;
    got.extend(rest);
    let expected_ids: Vec<i64> = (1..=got.len() as i64).collect();
    assert_eq!(ids(&got), expected_ids, "{:?}", kinds(&got));
    let tail: Vec<&str> = kinds(&got)[got.len() - 3..].to_vec();
    assert_eq!(tail, ["text_delta", "text_delta", "done"]);
    assert!(kinds(&got).contains(&"tool_result"));
    // Whoever has read `done`, on either process, finds the run ended.
    for server in [&other, &base] {
        let (_, run) = get(&format!("{server}/v1/runs/{run_id}"), &token).await;
        assert_eq!(run["status"], "done");
        assert_eq!(run["last_event_id"], got.len() as i64);
    }
    // Stopping from the other process reaches the run here.
    model.push(call(
        "call_model_info2",
        "document_info",
        &format!(r#"{{"document_id":"{}"}}"#, w.doc),
    ));
    let mut turn = chat(&base, &token, json!({"messages": [user("again")]})).await;
    let run2 = turn.run_id.clone().unwrap();
    turn.until("approval_request").await;
    let (status, body) = post(&format!("{other}/v1/runs/{run2}/stop"), &token, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "stopped");
    assert_eq!(kinds(&turn.rest().await), ["approval_result", "done"]);
}
