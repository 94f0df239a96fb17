//! The server's limits against a real server on 127.0.0.1 and PostgreSQL:
//! /v1/chat's per-user runs at once and turns per minute (429 with
//! Retry-After), /metrics behind a service token or on its own listener,
//! one metrics label for every unknown tool, what /readyz tells anonymous
//! callers, and tool rate limits overridden by an admin setting.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use data_plane::auth::{JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{FakeModel, Piece, Reply};
use data_plane_store::Scope;
use data_plane_store::identity::{self, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_web::search::WebSearch;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

const MONITOR_TOKEN: &str = "monitor-token-0123456789abcdef";

struct World {
    _test: TestDatabase,
    jwt: JwtKeys,
    state: AppState,
    alice: Uuid,
    bob: Uuid,
    admin: Uuid,
}

async fn world() -> World {
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let mut user = async |email: &str, permission: Permission| {
        identity::upsert_user(&mut tx, email, Some(permission))
            .await
            .unwrap()
            .id
    };
    let alice = user("alice@example.com", Permission::User).await;
    let bob = user("bob@example.com", Permission::User).await;
    let admin = user("admin@example.com", Permission::Admin).await;
    tx.commit().await.unwrap();
    let jwt = common::jwt();
    let services = ServiceTokens::parse(&format!("monitor={MONITOR_TOKEN}")).unwrap();
    let state = common::state_with(
        db,
        common::embedder(),
        jwt.clone(),
        services,
        WebSearch::default(),
    );
    World {
        _test: test,
        jwt,
        state,
        alice,
        bob,
        admin,
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
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn post_chat(base: &str, token: &str) -> reqwest::Response {
    client()
        .post(format!("{base}/v1/chat"))
        .bearer_auth(token)
        .json(&json!({ "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap()
}

/// A 429's Retry-After in seconds and its JSON error.
async fn refusal(r: reqwest::Response) -> (u64, Value) {
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after = r
        .headers()
        .get("retry-after")
        .expect("a 429 says when to retry")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    (retry_after, r.json().await.unwrap())
}

#[tokio::test]
async fn chat_runs_and_turns_per_user_are_limited_with_429_and_retry_after() {
    let w = world().await;
    let model = FakeModel::start().await;
    for _ in 0..8 {
        // Each run waits on the model until its client goes away.
        model.push(Reply::Stream(vec![Piece::Hang]));
    }
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.first_byte_timeout = Duration::from_secs(30);
    config.idle_timeout = Duration::from_secs(30);
    let state = w
        .state
        .clone()
        .with_chat_limits(2, 3)
        .with_agent(config)
        .unwrap();
    let base = common::serve(state).await;
    let alice = w.token(w.alice, Permission::User);

    let first = post_chat(&base, &alice).await;
    let second = post_chat(&base, &alice).await;
    assert_eq!(
        (first.status(), second.status()),
        (StatusCode::OK, StatusCode::OK)
    );
    let (retry_after, body) = refusal(post_chat(&base, &alice).await).await;
    assert_eq!(retry_after, 5);
    assert_eq!(body["error"]["code"], "rate_limited");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("2 runs of yours (chat turns and tasks)"),
        "{message}"
    );
    // Another user has places of their own.
    let bobs = post_chat(&base, &w.token(w.bob, Permission::User)).await;
    assert_eq!(bobs.status(), StatusCode::OK);

    // Stopping a run frees its place: alice's third turn. (Closing its
    // stream would too, after the grace period.) The runs are waited for
    // at the model first: one stopped before it asks never hangs up there.
    assert!(model.wait_requests(3, Duration::from_secs(10)).await);
    stop(&base, &alice, &first).await;
    drop(first);
    assert!(model.wait_dropped(1, Duration::from_secs(5)).await);
    // The run's task ends just after its model connection closes; refused
    // attempts are not counted, so asking again until then is harmless.
    let mut third = post_chat(&base, &alice).await;
    for _ in 0..50 {
        if third.status() != StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        third = post_chat(&base, &alice).await;
    }
    assert_eq!(third.status(), StatusCode::OK);
    assert!(model.wait_requests(4, Duration::from_secs(10)).await);
    stop(&base, &alice, &second).await;
    stop(&base, &alice, &third).await;
    stop(&base, &w.token(w.bob, Permission::User), &bobs).await;
    drop((second, third, bobs));
    assert!(model.wait_dropped(4, Duration::from_secs(5)).await);

    // Nothing runs now, but three turns in a minute is alice's limit.
    let (retry_after, body) = refusal(post_chat(&base, &alice).await).await;
    assert!((50..=60).contains(&retry_after), "{retry_after}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("3 runs (chat turns and tasks) in the last minute"),
        "{message}"
    );
    assert_eq!(
        model.requests().len(),
        4,
        "a refused turn never reaches the model"
    );
}

#[tokio::test]
async fn metrics_need_a_service_token_or_their_own_listener() {
    let w = world().await;
    let base = common::serve(w.state.clone()).await;
    let get = async |token: Option<&str>| {
        let mut r = client().get(format!("{base}/metrics"));
        if let Some(token) = token {
            r = r.bearer_auth(token);
        }
        let r = r.send().await.unwrap();
        (r.status(), r.text().await.unwrap())
    };
    let (status, body) = get(None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains(r#""code":"unauthorized""#), "{body}");
    let (status, body) = get(Some(&w.token(w.admin, Permission::Admin))).await;
    assert!(body.contains("service token"), "{body}");
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a person's token is not enough"
    );
    let (status, body) = get(Some(MONITOR_TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("data_plane_http_requests_total"), "{body}");

    // DATA_PLANE_METRICS_ADDR: a listener with /metrics only, no token.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_base = format!("http://{}", listener.local_addr().unwrap());
    let app = data_plane::http::metrics::app(w.state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let r = client()
        .get(format!("{metrics_base}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("data_plane_http_requests_total")
    );
    let r = client()
        .get(format!("{metrics_base}/v1/tools"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn unknown_tool_names_share_one_metrics_label() {
    let w = world().await;
    let base = common::serve(w.state.clone()).await;
    let alice = w.token(w.alice, Permission::User);
    let made_up: Vec<String> = (0..5).map(|i| format!("made_up_tool_{i}")).collect();
    for name in made_up.iter().map(String::as_str).chain(["list_sources"]) {
        let r = client()
            .post(format!("{base}/v1/tools/{name}/execute"))
            .bearer_auth(&alice)
            .json(&json!({ "args": {} }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{name}");
    }
    let metrics = common::metrics(&base, MONITOR_TOKEN).await;
    assert!(
        metrics.contains(r#"data_plane_tool_calls_total{tool="unknown",outcome="unknown_tool"} 5"#),
        "{metrics}"
    );
    for name in &made_up {
        assert!(!metrics.contains(name.as_str()), "{name} became a label");
    }
    // A real tool keeps its own name, whatever its outcome.
    assert!(metrics.contains(r#"tool="list_sources""#), "{metrics}");
}

#[tokio::test]
async fn readyz_tells_anonymous_callers_only_status_database_and_index() {
    let w = world().await;
    let base = common::serve(w.state.clone()).await;
    let get = async |token: Option<&str>| {
        let mut r = client().get(format!("{base}/readyz"));
        if let Some(token) = token {
            r = r.bearer_auth(token);
        }
        let r = r.send().await.unwrap();
        (r.status(), r.json::<Value>().await.unwrap())
    };
    let ready = json!({ "status": "ready", "database": true, "index": "caught_up" });
    assert_eq!(get(None).await, (StatusCode::OK, ready.clone()));
    let alice = w.token(w.alice, Permission::User);
    assert_eq!(get(Some(&alice)).await, (StatusCode::OK, ready));
    let (status, monitored) = get(Some(MONITOR_TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(monitored["database"], true);
    assert!(monitored["index_seq"].is_u64(), "{monitored}");

    // A replica whose index is still catching up, then one that is
    // stopping, is not ready: a balancer sends it nothing.
    w.state.readiness.starting();
    assert_eq!(
        get(None).await,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "status": "starting", "database": true, "index": "catching_up" })
        )
    );
    w.state.readiness.index_caught_up();
    w.state.readiness.drain();
    assert_eq!(
        get(None).await,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "status": "draining", "database": true, "index": "caught_up" })
        )
    );
}

#[tokio::test]
async fn an_admin_setting_overrides_a_tools_rate_limit() {
    let w = world().await;
    let base = common::serve(w.state.clone()).await;
    let admin = w.token(w.admin, Permission::Admin);
    let put = async |body: Value| {
        let r = client()
            .put(format!("{base}/v1/admin/settings"))
            .bearer_auth(&admin)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status(), r.json::<Value>().await.unwrap())
    };
    let (status, body) =
        put(json!({ "tool_rate_limits": { "no_such_tool": { "daily_limit": 1 } } })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool"),
        "{body}"
    );
    let (status, body) =
        put(json!({ "tool_rate_limits": { "list_sources": { "limit": 1 } } })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // find_by_name has no limits of its own; the setting gives it one.
    let (status, body) =
        put(json!({ "tool_rate_limits": { "find_by_name": { "daily_limit": 2 } } })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["tool_rate_limits"],
        json!({ "find_by_name": { "daily_limit": 2 } })
    );
    let call = async |user: Uuid| {
        let r: Value = client()
            .post(format!("{base}/v1/tools/find_by_name/execute"))
            .bearer_auth(w.token(user, Permission::User))
            .json(&json!({ "args": { "pattern": "*.md" } }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r
    };
    assert_eq!(call(w.alice).await["success"], true);
    assert_eq!(call(w.alice).await["success"], true);
    let refused = call(w.alice).await;
    assert_eq!(refused["error"]["code"], "rate_limited", "{refused}");
    assert_eq!(call(w.bob).await["success"], true, "limits count per user");

    // Lifted again (null), alice's calls go through.
    let (status, _) =
        put(json!({ "tool_rate_limits": { "find_by_name": { "daily_limit": null } } })).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(call(w.alice).await["success"], true);
}

/// Stops the run whose stream `r` is, as its user.
async fn stop(base: &str, token: &str, r: &reqwest::Response) {
    let run_id = r.headers()["x-run-id"].to_str().unwrap();
    let stopped = reqwest::Client::new()
        .post(format!("{base}/v1/runs/{run_id}/stop"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(stopped.status(), StatusCode::OK);
}
