//! The tool surface over HTTP against a real server on 127.0.0.1, the real
//! PostgreSQL and the real local model: listing per context, execution as
//! JSON and as an event stream, admin settings seen by a second replica,
//! the module protocol with service tokens, metrics, the OpenAPI document,
//! the audit log, and every error path answering JSON.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use data_plane::auth::{JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_store::Scope;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_web::search::{SearchConfig, WebSearch};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

const SERVICE_TOKEN: &str = "svc-token-0123456789abcdef0123";

struct World {
    test: TestDatabase,
    jwt: JwtKeys,
    /// Two replicas over the same database.
    base: String,
    replica: String,
    state: AppState,
    alice: Uuid,
    admin: Uuid,
    alpha: Uuid,
    beta: Uuid,
    doc: Uuid,
    secret_doc: Uuid,
}

async fn world() -> World {
    world_with(WebSearch::default()).await
}

/// A world whose replicas search the web with `web_search`.
async fn world_with(web_search: WebSearch) -> World {
    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let embedder = common::embedder();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let alice = identity::upsert_user(&mut tx, "alice@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let admin = identity::upsert_user(&mut tx, "root@example.com", Some(Permission::Admin))
        .await
        .unwrap()
        .id;
    let bob = identity::upsert_user(&mut tx, "bob@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let (alpha, _) = identity::ensure_space(&mut tx, "alpha").await.unwrap();
    let (beta, _) = identity::ensure_space(&mut tx, "beta").await.unwrap();
    identity::add_member(&mut tx, alpha.id, alice, MembershipRole::Viewer)
        .await
        .unwrap();
    identity::add_member(&mut tx, beta.id, bob, MembershipRole::Owner)
        .await
        .unwrap();
    let a_src = content::ensure_source(&mut tx, alpha.id, "notes", SourceKind::Files)
        .await
        .unwrap();
    let b_src = content::ensure_source(&mut tx, beta.id, "secret", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let pipeline = Pipeline::new(db.clone(), embedder.clone());
    let doc = pipeline
        .ingest_file(
            Scope::System,
            Target {
                space_id: alpha.id,
                source_id: a_src.id,
            },
            "guides/vacuum.md",
            b"# Vacuuming\n\nVACUUM reclaims storage occupied by dead tuples.\n",
        )
        .await
        .unwrap()
        .document_id;
    let secret_doc = pipeline
        .ingest_file(
            Scope::System,
            Target {
                space_id: beta.id,
                source_id: b_src.id,
            },
            "plans/zanzibar.md",
            b"# Project Zanzibar\n\nConfidential.\n",
        )
        .await
        .unwrap()
        .document_id;
    let jwt = common::jwt();
    let services = ServiceTokens::parse(&format!("billing={SERVICE_TOKEN}")).unwrap();
    let make = || {
        common::state_with(
            db.clone(),
            embedder.clone(),
            jwt.clone(),
            services.clone(),
            web_search.clone(),
        )
    };
    let state = make();
    let base = common::serve(state.clone()).await;
    let replica = common::serve(make()).await;
    World {
        test,
        jwt,
        base,
        replica,
        state,
        alice,
        admin,
        alpha: alpha.id,
        beta: beta.id,
        doc,
        secret_doc,
    }
}

impl World {
    fn token(&self, user: Uuid, role: Permission) -> String {
        self.jwt
            .issue(
                user,
                "x@example.com",
                role,
                std::time::Duration::from_secs(600),
            )
            .unwrap()
    }
    fn alice(&self) -> String {
        self.token(self.alice, Permission::User)
    }
    fn admin(&self) -> String {
        self.token(self.admin, Permission::Admin)
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn json_of(r: reqwest::Response) -> (StatusCode, Value) {
    let status = r.status();
    let ctype = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    assert!(
        ctype.starts_with("application/json"),
        "{status} answered {ctype}: {body}"
    );
    (status, body)
}

fn names(tools: &Value) -> Vec<String> {
    tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

async fn list_tools(base: &str, token: &str, space: Option<Uuid>) -> (StatusCode, Value) {
    let mut url = format!("{base}/v1/tools");
    if let Some(s) = space {
        url.push_str(&format!("?spaceId={s}"));
    }
    json_of(client().get(url).bearer_auth(token).send().await.unwrap()).await
}

#[tokio::test]
async fn tools_are_listed_per_context() {
    let w = world().await;
    let (status, all) = list_tools(&w.base, &w.alice(), None).await;
    assert_eq!(status, StatusCode::OK);
    let without_space = names(&all);
    assert_eq!(
        without_space,
        [
            "analyze_document",
            "document_info",
            "fetch_web_page",
            "find_by_name",
            "grep_documents",
            "query_documents",
            "read_document",
            "search_documents"
        ],
        "no navigation without a space; web search is off by default"
    );
    assert_eq!(all["tools"][0]["type"], "function");
    assert!(all["tools"][0]["function"]["parameters"]["properties"].is_object());

    let (_, in_space) = list_tools(&w.base, &w.alice(), Some(w.alpha)).await;
    let in_space = names(&in_space);
    for nav in ["folder_tree", "list_folder_contents", "list_sources"] {
        assert!(in_space.iter().any(|n| n == nav), "{nav} in {in_space:?}");
    }

    // A guest is not offered the tools that need a user.
    let guest = {
        let mut tx = w.test.db.begin(Scope::System).await.unwrap();
        let guest = identity::upsert_user(&mut tx, "guest@example.com", Some(Permission::Guest))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        w.token(guest.id, Permission::Guest)
    };
    let (_, guest_tools) = list_tools(&w.base, &guest, None).await;
    assert!(!names(&guest_tools).iter().any(|n| n == "analyze_document"));

    // A space the caller is not in: 404, the same as a missing one.
    let (status, body) = list_tools(&w.base, &w.alice(), Some(w.beta)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _) = list_tools(&w.base, &w.alice(), Some(Uuid::new_v4())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn execute_answers_tool_results_as_json() {
    let w = world().await;
    let url = format!("{}/v1/tools/document_info/execute", w.base);
    let r = client()
        .post(&url)
        .bearer_auth(w.alice())
        .header("x-request-id", "req-42")
        .json(&json!({ "args": { "document_id": w.doc }, "callId": "call-1" }))
        .send()
        .await
        .unwrap();
    let (status, result) = json_of(r).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["call_id"], "call-1");
    assert_eq!(result["data"]["path"], "guides/vacuum.md");

    // Tool failures are results the model can act on, not HTTP errors.
    let check = async |tool: &str, args: Value, code: &str, needle: &str| {
        let r = client()
            .post(format!("{}/v1/tools/{tool}/execute", w.base))
            .bearer_auth(w.alice())
            .json(&json!({ "args": args }))
            .send()
            .await
            .unwrap();
        let (status, result) = json_of(r).await;
        assert_eq!(status, StatusCode::OK, "{tool}: {result}");
        assert_eq!(result["success"], false, "{tool}: {result}");
        assert_eq!(result["error"]["code"], code, "{tool}: {result}");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{tool}: {message}");
    };
    check("document_inf", json!({}), "unknown_tool", "document_info").await;
    check(
        "document_info",
        json!({ "document_id": 7 }),
        "invalid_arguments",
        "/document_id",
    )
    .await;
    check(
        "document_info",
        json!({ "document_id": w.doc, "extra": 1 }),
        "invalid_arguments",
        "extra",
    )
    .await;
    check(
        "document_info",
        json!({ "document_id": w.secret_doc }),
        "not_found",
        "no document",
    )
    .await;
    check("list_sources", json!({}), "not_available", "space").await;

    // The audit log has the call, stamped with the request's id.
    w.state.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let row: (String, bool, String, String) = sqlx::query_as(
        "SELECT tool, success, request_id, call_id FROM tool_calls WHERE call_id = 'call-1'",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!(
        row,
        (
            "document_info".into(),
            true,
            "req-42".into(),
            "call-1".into()
        )
    );
    let failed: i64 = sqlx::query_scalar("SELECT count(*) FROM tool_calls WHERE NOT success")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(failed, 5);
}

#[tokio::test]
async fn bad_requests_get_json_errors_naming_the_problem() {
    let w = world().await;
    let url = format!("{}/v1/tools/document_info/execute", w.base);
    let cases: Vec<(reqwest::RequestBuilder, StatusCode, &str)> = vec![
        (
            client().post(&url).json(&json!({ "args": {} })),
            StatusCode::UNAUTHORIZED,
            "Authorization",
        ),
        (
            client().post(&url).bearer_auth("nonsense").json(&json!({})),
            StatusCode::UNAUTHORIZED,
            "not valid",
        ),
        (
            client()
                .post(&url)
                .bearer_auth(w.alice())
                .header("content-type", "application/json")
                .body("{not json"),
            StatusCode::BAD_REQUEST,
            "JSON",
        ),
        (
            client()
                .post(&url)
                .bearer_auth(w.alice())
                .json(&json!({ "args": {}, "bogus": 1 })),
            StatusCode::BAD_REQUEST,
            "bogus",
        ),
        (
            client()
                .post(&url)
                .bearer_auth(w.alice())
                .json(&json!({ "spaceId": 5 })),
            StatusCode::BAD_REQUEST,
            "spaceId",
        ),
        (
            client().post(&url).bearer_auth(w.alice()).body("{}"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type",
        ),
        (
            client()
                .get(format!("{}/v1/tools?spaceId=nope", w.base))
                .bearer_auth(w.alice()),
            StatusCode::BAD_REQUEST,
            "spaceId",
        ),
        (
            client()
                .get(format!("{}/v1/tools?colour=red", w.base))
                .bearer_auth(w.alice()),
            StatusCode::BAD_REQUEST,
            "colour",
        ),
        (
            client().get(&url).bearer_auth(w.alice()),
            StatusCode::METHOD_NOT_ALLOWED,
            "method",
        ),
        (
            client().get(format!("{}/v1/nothing", w.base)),
            StatusCode::NOT_FOUND,
            "no such endpoint",
        ),
        (
            client()
                .get(format!("{}/v1/admin/settings", w.base))
                .bearer_auth(w.alice()),
            StatusCode::FORBIDDEN,
            "admins",
        ),
        (
            client()
                .get(format!("{}/manifest", w.base))
                .bearer_auth(w.alice()),
            StatusCode::UNAUTHORIZED,
            "service token",
        ),
        (
            client()
                .get(format!("{}/v1/tools", w.base))
                .bearer_auth(SERVICE_TOKEN),
            StatusCode::BAD_REQUEST,
            "x-on-behalf-of",
        ),
    ];
    for (request, status, needle) in cases {
        let (got, body) = json_of(request.send().await.unwrap()).await;
        assert_eq!(got, status, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(needle),
            "{status}: {message:?} lacks {needle:?}"
        );
        assert!(body["error"]["code"].is_string());
    }
}

#[tokio::test]
async fn execute_streams_events_then_the_result() {
    let w = world().await;
    let r = client()
        .post(format!("{}/v1/tools/read_document/execute", w.base))
        .bearer_auth(w.alice())
        .header("accept", "text/event-stream")
        .json(&json!({ "args": { "document_id": w.doc, "max_length": 10 } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(r.headers()["x-accel-buffering"], "no");
    let mut events = eventsource_stream::EventStream::new(r.bytes_stream());
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        let event = event.unwrap();
        let data: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(data["type"], event.event, "the JSON names its own type");
        seen.push((event.id.clone(), event.event.clone(), data));
    }
    let kinds: Vec<&str> = seen.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["tool_call", "tool_result", "done"]);
    let ids: Vec<&str> = seen.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, ["1", "2", "3"]);
    assert_eq!(seen[0].2["name"], "read_document");
    assert_eq!(seen[1].2["result"]["data"]["end"], 10);
    assert_eq!(seen[0].2["call_id"], seen[1].2["call_id"]);
}

/// A settings change is answered only once every live lease holds it: a
/// replica that has not heard it yet (here a lease written by hand, as a
/// replica cut off from its notifications would leave it) holds the answer
/// back until its lease ends, when that replica has stopped serving from
/// its cache. Meanwhile the replicas that did hear it apply it at once.
#[tokio::test]
async fn a_settings_change_waits_for_every_live_lease() {
    let w = world().await;
    // The replicas' own leases are in place before the test goes on.
    for _ in 0..200 {
        if w.state.settings_cache.get().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(w.state.settings_cache.get().is_some(), "no lease after 2 s");

    let lagging = Uuid::new_v4();
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    sqlx::query(
        "INSERT INTO settings_replicas (replica, heard, alive_until)
         VALUES ($1, 0, clock_timestamp() + interval '1500 milliseconds')",
    )
    .bind(lagging)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let started = std::time::Instant::now();
    let r = client()
        .put(format!("{}/v1/admin/settings", w.base))
        .bearer_auth(w.admin())
        .json(&json!({ "web_search_enabled": true }))
        .send()
        .await
        .unwrap();
    let waited = started.elapsed();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        waited >= Duration::from_millis(1_300),
        "answered after {waited:?}, before the lagging lease ended"
    );
    // Both real replicas hold the change and apply it from their caches.
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let (version, behind): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT version FROM settings_version),
                (SELECT count(*) FROM settings_replicas
                  WHERE heard < (SELECT version FROM settings_version) AND replica <> $1)",
    )
    .bind(lagging)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert!(version > 1);
    assert_eq!(behind, 0, "a live replica has not heard version {version}");
    assert!(w.state.settings_cache.get().unwrap().web_search_enabled);
    let (_, tools) = list_tools(&w.replica, &w.alice(), None).await;
    assert!(names(&tools).iter().any(|n| n == "web_search"));

    // With no lease behind, a change is answered without that wait, and a
    // lease given up (a replica shutting down) is no longer waited on.
    w.state.settings_cache.end_lease().await;
    assert!(w.state.settings_cache.get().is_none());
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let leases: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM settings_replicas WHERE alive_until > clock_timestamp()",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(leases, 1, "only the other replica's lease is left");
    let r = client()
        .put(format!("{}/v1/admin/settings", w.base))
        .bearer_auth(w.admin())
        .json(&json!({ "web_search_enabled": false }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // The replica without a lease reads the database per request.
    assert!(!w.state.settings().await.unwrap().web_search_enabled);
    let (_, tools) = list_tools(&w.replica, &w.alice(), None).await;
    assert!(!names(&tools).iter().any(|n| n == "web_search"));
}

#[tokio::test]
async fn admins_switch_web_search_for_every_replica() {
    let w = world().await;
    let settings = format!("{}/v1/admin/settings", w.base);
    let (status, current) = json_of(
        client()
            .get(&settings)
            .bearer_auth(w.admin())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        current,
        json!({
            "web_search_enabled": false,
            "fetch_web_page_enabled": true,
            "web_search_provider": "searxng",
            "tool_rate_limits": {},
            "approvals": {"tools": [], "categories": [], "annotations": []},
            "fetch_web_page_trusted_hosts": [],
            "search_bm25": {"k1": 0.5},
            "search_field_weights": {"heading": 2.0, "title": 0.2},
            "search_fusion": {"method": "convex", "vector_weight": 0.5, "scale": "mean_3sd"}
        })
    );

    let put = async |body: Value| {
        json_of(
            client()
                .put(&settings)
                .bearer_auth(w.admin())
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    let (status, after) = put(json!({ "web_search_enabled": true })).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(after["web_search_enabled"], true);
    // The other replica sees it on its very next request.
    let (_, tools) = list_tools(&w.replica, &w.alice(), None).await;
    assert!(names(&tools).iter().any(|n| n == "web_search"));

    let (_, _) = put(json!({ "web_search_enabled": false, "fetch_web_page_enabled": false })).await;
    let (_, tools) = list_tools(&w.replica, &w.alice(), None).await;
    let tools = names(&tools);
    assert!(
        !tools
            .iter()
            .any(|n| n == "web_search" || n == "fetch_web_page"),
        "{tools:?}"
    );
    // Calling a switched-off tool is refused as not available.
    let r = client()
        .post(format!("{}/v1/tools/fetch_web_page/execute", w.replica))
        .bearer_auth(w.alice())
        .json(&json!({ "args": { "url": "http://127.0.0.1/" } }))
        .send()
        .await
        .unwrap();
    let (_, result) = json_of(r).await;
    assert_eq!(result["error"]["code"], "not_available");

    let (status, body) = put(json!({ "web_search": true })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("web_search")
    );
    let (status, body) = put(json!({ "web_search_enabled": "yes" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // A user is refused, and nothing changed.
    let r = client()
        .put(&settings)
        .bearer_auth(w.alice())
        .json(&json!({ "web_search_enabled": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (_, now) = json_of(
        client()
            .get(&settings)
            .bearer_auth(w.admin())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        now,
        json!({
            "web_search_enabled": false,
            "fetch_web_page_enabled": false,
            "web_search_provider": "searxng",
            "tool_rate_limits": {},
            "approvals": {"tools": [], "categories": [], "annotations": []},
            "fetch_web_page_trusted_hosts": [],
            "search_bm25": {"k1": 0.5},
            "search_field_weights": {"heading": 2.0, "title": 0.2},
            "search_fusion": {"method": "convex", "vector_weight": 0.5, "scale": "mean_3sd"}
        })
    );
    // Field weights are checked when they are set (a field left out keeps
    // its default).
    let (status, body) = put(json!({ "search_field_weights": {"title": -1} })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("title must lie between 0 and 10"),
        "{body}"
    );
    let (status, body) = put(json!({ "search_field_weights": {"titel": 1} })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = put(json!({ "search_field_weights": {"title": 0.5} })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["search_field_weights"], json!({"title": 0.5}));
    // So is BM25's k1, whose b follows from it and cannot be given.
    let (status, body) = put(json!({ "search_bm25": {"k1": 0.2} })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("k1 must be above 0.3 and at most 3"),
        "{body}"
    );
    let (status, body) = put(json!({ "search_bm25": {"k1": 0.9, "b": 0.4} })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = put(json!({ "search_bm25": {"k1": 1.2} })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["search_bm25"], json!({"k1": 1.2}));
    // The fusion is checked when it is set.
    let (status, body) =
        put(json!({ "search_fusion": {"method": "convex", "vector_weight": 2} })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("vector_weight must be between 0 and 1"),
        "{body}"
    );
    // Approval rules are checked like every setting: a wrong shape is named.
    let (status, body) = put(json!({ "approvals": {"categories": ["weather"]} })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"approvals\""), "{message}");
    // A name that is no tool's (nor a configured module's) would never apply.
    let (status, body) = put(json!({ "approvals": {"tools": ["crm.*"]} })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"crm.*\""), "{message}");
    let (status, body) =
        put(json!({ "approvals": {"annotations": ["open_world"], "tools": ["query_documents"]} }))
            .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["approvals"]["annotations"], json!(["open_world"]));
    assert_eq!(body["approvals"]["tools"], json!(["query_documents"]));
}

/// Fake SearXNG (`GET /search`) and Brave (`GET /res/v1/web/search`) APIs
/// on 127.0.0.1, answering one result each in their real formats.
async fn fake_search_providers() -> String {
    use axum::http::HeaderMap;
    use axum::routing::get;
    let searxng = async || {
        axum::Json(json!({
            "query": "vacuum", "number_of_results": 0,
            "results": [{
                "url": "https://www.postgresql.org/docs/current/sql-vacuum.html",
                "title": "VACUUM", "content": "VACUUM reclaims storage occupied by dead tuples.",
                "publishedDate": null, "engine": "duckduckgo", "engines": ["duckduckgo"],
                "positions": [1], "score": 1.0, "category": "general", "template": "default.html"
            }],
            "answers": [], "corrections": [], "infoboxes": [], "suggestions": [],
            "unresponsive_engines": []
        }))
    };
    let brave = async |headers: HeaderMap| {
        if headers
            .get("x-subscription-token")
            .is_none_or(|t| t != "BSA-e2e")
        {
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({ "type": "ErrorResponse", "error": {
                    "id": "1", "status": 401, "code": "SUBSCRIPTION_TOKEN_INVALID",
                    "detail": "The provided subscription token is invalid.", "meta": {} },
                    "time": 1732000000 })),
            );
        }
        (
            StatusCode::OK,
            axum::Json(json!({
                "type": "search", "query": { "original": "vacuum" },
                "web": { "type": "search", "results": [{
                    "title": "Routine <strong>Vacuuming</strong>",
                    "url": "https://www.postgresql.org/docs/current/routine-vacuuming.html",
                    "description": "Periodic <strong>vacuuming</strong>.",
                    "page_age": "2024-11-14T00:00:00", "age": "November 14, 2024",
                    "type": "search_result"
                }] }
            })),
        )
    };
    let app = axum::Router::new()
        .route("/search", get(searxng))
        .route("/res/v1/web/search", get(brave));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

#[tokio::test]
async fn admins_choose_the_web_search_provider_for_every_replica() {
    let providers = fake_search_providers().await;
    let w = world_with(
        WebSearch::new(&SearchConfig {
            searxng_url: Some(providers.clone()),
            brave_api_key: Some("BSA-e2e".into()),
            brave_url: providers.clone(),
            ..SearchConfig::default()
        })
        .unwrap(),
    )
    .await;
    let settings = format!("{}/v1/admin/settings", w.base);
    let put = async |body: Value| {
        json_of(
            client()
                .put(&settings)
                .bearer_auth(w.admin())
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    let search = async || {
        // web_search has a 500 ms cooldown per user.
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        let r = client()
            .post(format!("{}/v1/tools/web_search/execute", w.replica))
            .bearer_auth(w.alice())
            .json(&json!({ "args": { "query": "vacuum", "count": 3 } }))
            .send()
            .await
            .unwrap();
        json_of(r).await.1
    };
    let (_, tools) = list_tools(&w.replica, &w.alice(), None).await;
    assert!(!names(&tools).iter().any(|n| n == "web_search"));
    assert_eq!(search().await["error"]["code"], "not_available");

    let (status, body) = put(json!({ "web_search_enabled": true })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = search().await;
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["data"]["provider"], "searxng");
    assert_eq!(
        result["data"]["results"],
        json!([{
            "title": "VACUUM",
            "url": "https://www.postgresql.org/docs/current/sql-vacuum.html",
            "snippet": "VACUUM reclaims storage occupied by dead tuples.",
            "published": null
        }])
    );
    assert!(
        result["data"]["note"]
            .as_str()
            .unwrap()
            .contains("untrusted")
    );

    // The other replica uses the new provider on its very next request.
    let (status, body) = put(json!({ "web_search_provider": "brave" })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["web_search_provider"], "brave");
    let result = search().await;
    assert_eq!(result["data"]["provider"], "brave", "{result}");
    assert_eq!(
        result["data"]["results"],
        json!([{
            "title": "Routine Vacuuming",
            "url": "https://www.postgresql.org/docs/current/routine-vacuuming.html",
            "snippet": "Periodic vacuuming.",
            "published": "2024-11-14"
        }])
    );

    // A provider that is not configured is a clear tool error, not a 500.
    let (status, _) = put(json!({ "web_search_provider": "tavily" })).await;
    assert_eq!(status, StatusCode::OK);
    let result = search().await;
    assert_eq!(result["error"]["code"], "not_available", "{result}");
    assert_eq!(result["error"]["retryable"], false);
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("set DATA_PLANE_TAVILY_API_KEY")
            && message.contains("configured: searxng, brave"),
        "{message}"
    );

    // An unknown provider is refused, naming the setting and the choices.
    let (status, body) = put(json!({ "web_search_provider": "bing" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    for word in ["web_search_provider", "bing", "searxng", "brave", "tavily"] {
        assert!(message.contains(word), "{message:?} should name {word}");
    }
    let (status, body) = put(json!({ "web_search_provider": 3 })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Keys are configuration, never settings an admin could read back.
    let (status, body) = put(json!({ "brave_api_key": "x" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (_, now) = json_of(
        client()
            .get(&settings)
            .bearer_auth(w.admin())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(now["web_search_provider"], "tavily");
    assert!(!now.to_string().contains("BSA-e2e"));

    // Switched off: gone from the list and refused on the next request.
    let (status, _) = put(json!({ "web_search_enabled": false })).await;
    assert_eq!(status, StatusCode::OK);
    let (_, tools) = list_tools(&w.replica, &w.alice(), None).await;
    assert!(!names(&tools).iter().any(|n| n == "web_search"));
    assert_eq!(search().await["error"]["code"], "not_available");
}

#[tokio::test]
async fn services_use_the_module_protocol_and_act_for_a_user() {
    let w = world().await;
    let (status, manifest) = json_of(
        client()
            .get(format!("{}/manifest", w.base))
            .bearer_auth(SERVICE_TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(manifest["tools"].as_array().unwrap().len(), 12);
    assert_eq!(manifest["tools"][0]["metadata"]["category"], "document");

    let execute = async |body: Value| {
        json_of(
            client()
                .post(format!("{}/execute", w.base))
                .bearer_auth(SERVICE_TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    let (status, result) = execute(json!({
        "tool_name": "document_info", "arguments": { "document_id": w.doc }, "user_id": w.alice
    }))
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(result["success"], true, "{result}");
    // Acting for alice, the service cannot see what alice cannot.
    let (_, result) = execute(json!({
        "tool_name": "document_info", "arguments": { "document_id": w.secret_doc }, "user_id": w.alice
    }))
    .await;
    assert_eq!(result["error"]["code"], "not_found");
    let (status, _) = execute(json!({
        "tool_name": "document_info", "arguments": {}, "user_id": Uuid::new_v4()
    }))
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = execute(json!({ "tool": "document_info", "user_id": w.alice })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // The same token on the /v1 routes, naming the user in a header.
    let (status, tools) = json_of(
        client()
            .get(format!("{}/v1/tools?spaceId={}", w.base, w.alpha))
            .bearer_auth(SERVICE_TOKEN)
            .header("x-on-behalf-of", w.alice.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(names(&tools).iter().any(|n| n == "list_sources"));
}

#[tokio::test]
async fn health_metrics_and_the_openapi_document() {
    let w = world().await;
    let (status, _) = json_of(
        client()
            .get(format!("{}/healthz", w.base))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, ready) = json_of(
        client()
            .get(format!("{}/readyz", w.base))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ready["database"], true);

    client()
        .post(format!("{}/v1/tools/document_info/execute", w.base))
        .bearer_auth(w.alice())
        .json(&json!({ "args": { "document_id": w.doc } }))
        .send()
        .await
        .unwrap();
    let metrics = common::metrics(&w.base, SERVICE_TOKEN).await;
    assert!(
        metrics
            .contains(r#"data_plane_tool_calls_total{tool="document_info",outcome="success"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"route="/v1/tools/{name}/execute""#),
        "{metrics}"
    );

    let (status, doc) = json_of(
        client()
            .get(format!("{}/openapi.json", w.base))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    // Every documented path answers something other than the 404 fallback,
    // and every route the server has is documented.
    let documented: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    for path in &documented {
        let concrete = path
            .replace("{name}", "document_info")
            .replace("{space_id}", &Uuid::new_v4().to_string())
            .replace("{source_id}", &Uuid::new_v4().to_string())
            .replace("{document_id}", &Uuid::new_v4().to_string())
            .replace("{run_id}", &Uuid::new_v4().to_string());
        for method in doc["paths"][path.as_str()].as_object().unwrap().keys() {
            if method == "parameters" {
                continue;
            }
            let r = client()
                .request(
                    method.to_uppercase().parse().unwrap(),
                    format!("{}{concrete}", w.base),
                )
                .send()
                .await
                .unwrap();
            let status = r.status();
            let body = r.text().await.unwrap();
            assert!(
                !(status == StatusCode::NOT_FOUND && body.contains("no such endpoint"))
                    && status != StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path} is documented but not served"
            );
        }
    }
    for route in data_plane::http::ROUTES {
        assert!(
            documented.iter().any(|p| p == route),
            "{route} is served but not documented"
        );
    }
}

/// A change made through one process is what a second `data-plane serve`
/// process answers with on its very next request, every time: settings are
/// read per request, and a membership (cached per process, dropped by
/// PostgreSQL's notifications) never lets a removed member read.
#[tokio::test]
async fn a_second_process_answers_every_change_on_its_next_request() {
    let w = world().await;
    let data_dir = tempfile::tempdir().unwrap();
    let (_other, other) = common::second_server(&w.test, data_dir.path()).await;

    let settings = format!("{}/v1/admin/settings", w.base);
    for round in 0..12 {
        let enabled = round % 2 == 0;
        // The other process has just read (and cached) the settings.
        let (status, tools) = list_tools(&other, &w.alice(), None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(names(&tools).iter().any(|n| n == "web_search"), !enabled);
        let r = client()
            .put(&settings)
            .bearer_auth(w.admin())
            .json(&json!({ "web_search_enabled": enabled }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let (_, tools) = list_tools(&other, &w.alice(), None).await;
        assert_eq!(
            names(&tools).iter().any(|n| n == "web_search"),
            enabled,
            "round {round}: the other process answered with the old settings"
        );
    }

    // A membership removed in the database is gone on the other process's
    // next request, though it had just answered from its copy: refused
    // outright once the notification is in, and never answered with the
    // document in between (the tool reads under row-level security).
    let info = |base: String| {
        let token = w.alice();
        let body = json!({ "args": { "document_id": w.doc }, "spaceId": w.alpha });
        async move {
            json_of(
                client()
                    .post(format!("{base}/v1/tools/document_info/execute"))
                    .bearer_auth(token)
                    .json(&body)
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let (status, body) = info(other.clone()).await;
    assert_eq!(
        (status, &body["success"]),
        (StatusCode::OK, &json!(true)),
        "{body}"
    );
    sqlx::query("DELETE FROM memberships WHERE user_id = $1 AND space_id = $2")
        .bind(w.alice)
        .bind(w.alpha)
        .execute(&w.test.owner)
        .await
        .unwrap();
    for base in [&other, &w.base] {
        // Never the document, and refused outright once the notification
        // is in (within two seconds, however busy the machine).
        let started = std::time::Instant::now();
        loop {
            let (status, body) = info(base.clone()).await;
            assert!(
                status == StatusCode::NOT_FOUND
                    || (status == StatusCode::OK && body["success"] == false),
                "{status} {body}"
            );
            assert!(!body.to_string().contains("vacuum"), "{body}");
            if status == StatusCode::NOT_FOUND {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(2),
                "{base} still let the removed member through after 2 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    // Granted again: the other process reads the membership afresh when a
    // named space is missing from its copy, so the very next call works.
    sqlx::query("INSERT INTO memberships (space_id, user_id, role) VALUES ($1, $2, 'viewer')")
        .bind(w.alpha)
        .bind(w.alice)
        .execute(&w.test.owner)
        .await
        .unwrap();
    let (status, body) = info(other.clone()).await;
    assert_eq!(
        (status, &body["success"]),
        (StatusCode::OK, &json!(true)),
        "{body}"
    );
}

/// The one rule of every door a person uses: a person may take only a
/// profile made for people (`chat: true`); a service token may take any.
/// An end user's executeTool call is audited under the profile it ran in.
#[tokio::test]
async fn people_take_only_profiles_made_for_people_at_every_door() {
    let w = world().await;
    let refused = |status: StatusCode, body: &Value, field: &str| {
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field}: the profile"))
                && message.contains("is not for people; choose one of chat, explore"),
            "{message}"
        );
    };
    for profile in ["service", "analyze_document"] {
        // The tool list.
        let (status, body) = json_of(
            client()
                .get(format!("{}/v1/tools?agent={profile}", w.base))
                .bearer_auth(w.alice())
                .send()
                .await
                .unwrap(),
        )
        .await;
        refused(status, &body, "agent");
        // executeTool.
        let (status, body) = json_of(
            client()
                .post(format!("{}/v1/tools/document_info/execute", w.base))
                .bearer_auth(w.alice())
                .json(&json!({ "args": { "document_id": w.doc }, "agent": profile }))
                .send()
                .await
                .unwrap(),
        )
        .await;
        refused(status, &body, "agent");
        // MCP: the request is answered with a JSON-RPC error naming the rule.
        let r = client()
            .post(format!("{}/mcp?agent={profile}", w.base))
            .bearer_auth(w.alice())
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        let reply: Value = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .find(|m: &Value| m["id"] == 1)
            .unwrap_or_else(|| panic!("no reply in {text}"));
        assert!(reply.get("result").is_none(), "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains("is not for people"), "{message}");
        // A service token acting for the same person may take it.
        let (status, body) = json_of(
            client()
                .get(format!("{}/v1/tools?agent={profile}", w.base))
                .bearer_auth(SERVICE_TOKEN)
                .header("x-on-behalf-of", w.alice.to_string())
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["agent"], profile);
    }
    // A person's own choices still work, and the default is chat.
    let (status, body) = list_tools(&w.base, &w.alice(), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["agent"], "chat");

    // executeTool by a person runs, and is audited, under chat (or the
    // profile the person chose); by a service, under service.
    let execute = async |token: &str, on_behalf: bool, body: Value| {
        let mut request = client()
            .post(format!("{}/v1/tools/document_info/execute", w.base))
            .bearer_auth(token)
            .json(&body);
        if on_behalf {
            request = request.header("x-on-behalf-of", w.alice.to_string());
        }
        let (status, result) = json_of(request.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{result}");
        assert_eq!(result["success"], true, "{result}");
    };
    let args = json!({ "document_id": w.doc });
    execute(
        &w.alice(),
        false,
        json!({ "args": args, "callId": "by-person" }),
    )
    .await;
    execute(
        &w.alice(),
        false,
        json!({ "args": args, "callId": "by-person-explore", "agent": "explore" }),
    )
    .await;
    execute(
        SERVICE_TOKEN,
        true,
        json!({ "args": args, "callId": "by-service" }),
    )
    .await;
    w.state.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let rows: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT call_id, agent FROM tool_calls
          WHERE call_id LIKE 'by-%' ORDER BY call_id",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    assert_eq!(
        rows,
        [
            ("by-person".to_string(), Some("chat".to_string())),
            ("by-person-explore".to_string(), Some("explore".to_string())),
            ("by-service".to_string(), Some("service".to_string())),
        ]
    );
}

/// The channels listened to on this test's database, by the names the
/// subscriptions give their connections.
async fn listening(w: &World) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT DISTINCT application_name FROM pg_stat_activity
          WHERE application_name LIKE 'data-plane listen %' AND datname = current_database()
          ORDER BY 1",
    )
    .fetch_all(w.state.db.pool())
    .await
    .unwrap()
}

/// Every subscriber of a server (runs, the identity cache, the settings
/// cache, the keyword-index follower) listens on a connection of its own;
/// when those backends are killed, each comes back by itself.
#[tokio::test]
async fn every_listener_comes_back_after_its_backend_is_killed() {
    let w = world().await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let follower =
        data_plane_search::follower::Follower::new(w.state.db.clone(), w.state.index.clone());
    tokio::spawn(follower.run(stopped));
    let expected: Vec<String> = [
        "data_plane_identity",
        "data_plane_index",
        "data_plane_runs",
        "data_plane_settings",
    ]
    .iter()
    .map(|c| format!("data-plane listen {c}"))
    .collect();
    let until_all_listen = async || {
        let started = std::time::Instant::now();
        loop {
            let now = listening(&w).await;
            if now == expected {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "listening: {now:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    until_all_listen().await;
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name LIKE 'data-plane listen %' AND datname = current_database()",
    )
    .fetch_all(w.state.db.pool())
    .await
    .unwrap();
    // Two replicas: each subscriber's connection on each.
    assert!(killed.len() >= expected.len(), "{killed:?}");
    assert!(killed.iter().all(|k| *k));
    until_all_listen().await;
    // A change made now reaches the other replica's next request.
    let r = client()
        .put(format!("{}/v1/admin/settings", w.base))
        .bearer_auth(w.admin())
        .json(&json!({ "web_search_enabled": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (_, tools) = list_tools(&w.replica, &w.alice(), None).await;
    assert!(names(&tools).iter().any(|n| n == "web_search"), "{tools}");
    let _ = stop.send(true);
}
