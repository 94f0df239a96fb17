//! Remote tool modules against real HTTP modules on 127.0.0.1: fake modules
//! speaking the common module contract (a fast one, a slow one, one down at
//! start that comes up later, one answering a malformed manifest), a second
//! `data-plane` process consumed as a module by this one and consuming it
//! back, the PostgreSQL cache shared by a second replica, a refresh after a
//! module's tools changed, a manifest that expires, one too large, one
//! refused for want of a token, and a chat turn that calls a remote tool.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use data_plane::auth::{JwtKeys, ServiceTokens};
use data_plane::state::AppState;
use data_plane_agent::AgentConfig;
use data_plane_agent::testing::{FakeModel, ScriptedCall, text_reply, tool_calls_reply};
use data_plane_modules::{ModuleConfig, ModulesConfig};
use data_plane_store::Scope;
use data_plane_store::identity::{self, Permission};
use data_plane_store::testing::TestDatabase;
use data_plane_web::search::WebSearch;
use futures::StreamExt;
use serde_json::{Value, json};
use uuid::Uuid;

const CRM_TOKEN: &str = "crm-module-token-0123456789abcdef";

/// A module written for another orchestrator: its manifest (swappable),
/// every request it received, and tools that answer, fail, stall or
/// stumble on purpose.
#[derive(Clone)]
struct FakeModule {
    name: &'static str,
    state: Arc<Mutex<FakeState>>,
}

struct FakeState {
    /// What `GET /manifest` answers (a string is sent as it is).
    manifest: Value,
    manifest_fetches: usize,
    /// `(tool_name, authorization header, body)` of each `/execute`.
    calls: Vec<(String, Option<String>, Value)>,
    /// Calls answered 503 so far, per tool.
    refused: HashMap<String, usize>,
}

impl FakeModule {
    fn new(name: &'static str, manifest: Value) -> FakeModule {
        FakeModule {
            name,
            state: Arc::new(Mutex::new(FakeState {
                manifest,
                manifest_fetches: 0,
                calls: Vec::new(),
                refused: HashMap::new(),
            })),
        }
    }

    fn set_manifest(&self, manifest: Value) {
        self.state.lock().unwrap().manifest = manifest;
    }

    fn manifest_fetches(&self) -> usize {
        self.state.lock().unwrap().manifest_fetches
    }

    fn calls_of(&self, tool: &str) -> Vec<(Option<String>, Value)> {
        self.state
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(t, _, _)| t == tool)
            .map(|(_, auth, body)| (auth.clone(), body.clone()))
            .collect()
    }

    fn router(&self) -> Router {
        let manifest = self.clone();
        let execute = self.clone();
        Router::new()
            .route(
                "/manifest",
                get(move |headers: HeaderMap| {
                    let module = manifest.clone();
                    async move { module.manifest(&headers) }
                }),
            )
            .route(
                "/execute",
                post(move |headers: HeaderMap, body: axum::Json<Value>| {
                    let module = execute.clone();
                    async move { module.execute(&headers, body.0).await }
                }),
            )
    }

    fn manifest(&self, headers: &HeaderMap) -> Response {
        let mut state = self.state.lock().unwrap();
        state.manifest_fetches += 1;
        if self.name == "crm" && auth(headers).as_deref() != Some(&format!("Bearer {CRM_TOKEN}")) {
            return (StatusCode::UNAUTHORIZED, "no").into_response();
        }
        match &state.manifest {
            Value::String(raw) => raw.clone().into_response(),
            other => axum::Json(other.clone()).into_response(),
        }
    }

    async fn execute(&self, headers: &HeaderMap, body: Value) -> Response {
        let tool = body["tool_name"].as_str().unwrap_or_default().to_string();
        let first_refusal = {
            let mut state = self.state.lock().unwrap();
            state
                .calls
                .push((tool.clone(), auth(headers), body.clone()));
            let refused = state.refused.entry(tool.clone()).or_default();
            let first = *refused == 0;
            if first && tool.contains("flaky") {
                *refused += 1;
            }
            first && tool.contains("flaky")
        };
        let args = &body["arguments"];
        match tool.as_str() {
            _ if first_refusal => (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response(),
            "crm.lookup" => axum::Json(json!({
                "tool_name": tool,
                "success": true,
                "result": {"email": args["email"], "name": "Ada Lovelace", "tier": "gold"}
            }))
            .into_response(),
            "crm.fail" => axum::Json(
                json!({"tool_name": tool, "success": false, "error": "customer not found"}),
            )
            .into_response(),
            "crm.garbage" => "<html>oops</html>".into_response(),
            "crm.sleepy" | "reports.build" => {
                let ms = args["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                axum::Json(json!({"tool_name": tool, "success": true, "result": {"slept_ms": ms}}))
                    .into_response()
            }
            _ => axum::Json(json!({"tool_name": tool, "success": true, "result": "ok"}))
                .into_response(),
        }
    }
}

fn auth(headers: &HeaderMap) -> Option<String> {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn serve_router(router: Router, addr: SocketAddr) -> String {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

fn crm_manifest() -> Value {
    json!({
        "name": "crm",
        "description": "Customer records",
        "version": "2.1",
        "tools": [
            {
                "name": "crm.lookup",
                "description": "Look up a customer by email. Answers the name and tier.",
                "parameters": [{"name": "email", "type": "string", "description": "Their email", "required": true}],
                "required_permission": "user",
                "annotations": {"readOnlyHint": true, "idempotentHint": true}
            },
            {"name": "crm.export_all", "description": "Export every customer.", "required_permission": "admin"},
            {"name": "crm.fail", "description": "Always fails."},
            {"name": "crm.garbage", "description": "Answers HTML."},
            {
                "name": "crm.sleepy",
                "description": "Sleeps.",
                "parameters": [{"name": "ms", "type": "integer", "required": true}]
            },
            {"name": "crm.flaky_read", "description": "Busy once.", "annotations": {"readOnlyHint": true, "idempotentHint": true}},
            {"name": "crm.flaky_write", "description": "Busy once, then writes."},
            {"name": "crm.search_documents", "description": "Would shadow nothing: it is crm's."},
            {"name": "crm.bad", "required_permission": "superuser"}
        ]
    })
}

fn module(name: &str, url: &str) -> ModuleConfig {
    ModuleConfig {
        name: name.into(),
        url: url.trim_end_matches('/').into(),
        token: None,
        slow: false,
        timeout_ms: None,
    }
}

struct World {
    test: TestDatabase,
    jwt: JwtKeys,
    user: Uuid,
    admin: Uuid,
}

async fn world() -> World {
    let test = TestDatabase::create().await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let user = identity::upsert_user(&mut tx, "ada@example.com", Some(Permission::User))
        .await
        .unwrap()
        .id;
    let admin = identity::upsert_user(&mut tx, "root@example.com", Some(Permission::Admin))
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    World {
        test,
        jwt: common::jwt(),
        user,
        admin,
    }
}

impl World {
    fn token(&self, id: Uuid, permission: Permission) -> String {
        self.jwt
            .issue(id, "x@example.com", permission, Duration::from_secs(600))
            .unwrap()
    }

    fn user_token(&self) -> String {
        self.token(self.user, Permission::User)
    }

    fn admin_token(&self) -> String {
        self.token(self.admin, Permission::Admin)
    }

    fn state(&self, services: &str, modules: ModulesConfig) -> AppState {
        let state = common::state_with(
            self.test.db.clone(),
            common::embedder(),
            self.jwt.clone(),
            ServiceTokens::parse(services).unwrap(),
            WebSearch::default(),
        )
        .with_modules(modules);
        state.modules.start();
        state
    }
}

async fn get_json(url: &str, token: &str) -> (u16, Value) {
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

async fn post_json(url: &str, token: &str, body: &Value) -> (u16, Value) {
    common::json(
        reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// The function names `GET /v1/tools` lists.
async fn listed(base: &str, token: &str, agent: &str) -> Vec<String> {
    let (status, body) = get_json(&format!("{base}/v1/tools?agent={agent}"), token).await;
    assert_eq!(status, 200, "{body}");
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until `GET /v1/tools` (profile chat) lists `function`.
async fn until_listed(what: &str, limit: Duration, base: &str, token: &str, function: &str) {
    eventually(what, limit, || async {
        listed(base, token, "chat")
            .await
            .iter()
            .any(|f| f == function)
    })
    .await;
}

/// The admin listing's entry for `name`.
async fn module_status(base: &str, admin: &str, name: &str) -> Value {
    let (status, body) = get_json(&format!("{base}/v1/admin/modules"), admin).await;
    assert_eq!(status, 200, "{body}");
    body["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no module {name} in {body}"))
}

/// Polls `check` until it holds, or fails after `limit`.
async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn execute(base: &str, token: &str, tool: &str, args: Value) -> Value {
    let (status, body) = post_json(
        &format!("{base}/v1/tools/{tool}/execute"),
        token,
        &json!({ "args": args }),
    )
    .await;
    assert_eq!(status, 200, "{tool}: {body}");
    body
}

#[tokio::test]
async fn modules_are_discovered_filtered_called_cached_and_refreshed() {
    let w = world().await;
    let crm = FakeModule::new("crm", crm_manifest());
    let crm_base = serve_router(crm.router(), "127.0.0.1:0".parse().unwrap()).await;
    let reports = FakeModule::new(
        "reports",
        json!({"name": "reports", "tools": [{
            "name": "reports.build",
            "description": "Build a report (slow).",
            "parameters": [{"name": "ms", "type": "integer", "required": true}]
        }]}),
    );
    let reports_base = serve_router(reports.router(), "127.0.0.1:0".parse().unwrap()).await;
    let broken = FakeModule::new("broken", json!("<html>this is no manifest</html>"));
    let broken_base = serve_router(broken.router(), "127.0.0.1:0".parse().unwrap()).await;
    // Down at start: nothing listens there yet.
    // Bound but not listening: connections are refused, and no other test
    // can take the port before the module comes up on it.
    let late_socket = tokio::net::TcpSocket::new_v4().unwrap();
    late_socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let late_addr = late_socket.local_addr().unwrap();
    let late = FakeModule::new(
        "late",
        json!({"name": "late", "tools": [{"name": "late.hello", "description": "Says hello."}]}),
    );

    let config = ModulesConfig {
        modules: vec![
            ModuleConfig {
                token: Some(CRM_TOKEN.into()),
                ..module("crm", &crm_base)
            },
            ModuleConfig {
                slow: true,
                ..module("reports", &reports_base)
            },
            module("broken", &broken_base),
            module("late", &format!("http://{late_addr}")),
        ],
        // The 30 s / 120 s split, shortened.
        timeout: Duration::from_millis(400),
        slow_timeout: Duration::from_millis(3000),
        ttl: Duration::from_secs(3600),
        retry_after: Duration::from_millis(300),
        discovery_timeout: Duration::from_secs(2),
    };
    let state = w.state("", config.clone());
    let base = common::serve(state.clone()).await;
    let (user, admin) = (w.user_token(), w.admin_token());

    // Discovery at start, in the background: the good ones are ready, the
    // bad ones failed with their reasons, and nothing else stopped.
    eventually("crm discovered", Duration::from_secs(10), || async {
        module_status(&base, &admin, "crm").await["state"] == "ready"
    })
    .await;
    eventually("the others tried", Duration::from_secs(10), || async {
        let late = module_status(&base, &admin, "late").await;
        let broken = module_status(&base, &admin, "broken").await;
        late["state"] == "failed" && broken["state"] == "failed"
    })
    .await;
    let status = module_status(&base, &admin, "crm").await;
    assert_eq!(status["url"], crm_base);
    assert_eq!(status["version"], "2.1");
    assert_eq!(status["last_error"], Value::Null);
    assert!(status["fetched_at"].is_string(), "{status}");
    let tools: Vec<&str> = status["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"crm.lookup") && tools.contains(&"crm.search_documents"));
    assert!(!tools.contains(&"crm.bad"), "{tools:?}");
    assert!(
        status["skipped"][0]
            .as_str()
            .unwrap()
            .contains("unknown required permission \"superuser\""),
        "{status}"
    );
    let broken_status = module_status(&base, &admin, "broken").await;
    assert!(
        broken_status["last_error"]
            .as_str()
            .unwrap()
            .contains("not JSON"),
        "{broken_status}"
    );
    assert_eq!(broken_status["tools"], json!([]));
    let late_status = module_status(&base, &admin, "late").await;
    assert!(
        late_status["last_error"]
            .as_str()
            .unwrap()
            .contains("GET http://"),
        "{late_status}"
    );
    assert_eq!(module_status(&base, &admin, "reports").await["slow"], true);

    // Admins only, and a refresh names a configured module.
    let (status, _) = get_json(&format!("{base}/v1/admin/modules"), &user).await;
    assert_eq!(status, 403);
    let (status, body) = post_json(
        &format!("{base}/v1/admin/modules/refresh"),
        &admin,
        &json!({"module": "nope"}),
    )
    .await;
    assert_eq!(status, 404);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("crm, reports, broken, late")
    );

    // Listed for the profiles that allow modules, as module__tool (function
    // names hold no dot), filtered by permission; not for explore.
    let for_user = listed(&base, &user, "chat").await;
    assert!(
        for_user.contains(&"crm__lookup".to_string()),
        "{for_user:?}"
    );
    assert!(for_user.contains(&"reports__build".to_string()));
    assert!(for_user.contains(&"search_documents".to_string()));
    assert!(
        !for_user.contains(&"crm__export_all".to_string()),
        "admin only"
    );
    let for_admin = listed(&base, &admin, "chat").await;
    assert!(for_admin.contains(&"crm__export_all".to_string()));
    let explore = listed(&base, &user, "explore").await;
    assert!(explore.iter().all(|t| !t.contains("__")), "{explore:?}");
    let chat = listed(&base, &user, "chat").await;
    assert!(chat.contains(&"crm__lookup".to_string()));

    // A call: arguments checked against the manifest's schema first, then
    // routed with the module's token, the user, the space and the request.
    let result = execute(
        &base,
        &user,
        "crm.lookup",
        json!({"email": "ada@example.com"}),
    )
    .await;
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["tool"], "crm.lookup");
    assert_eq!(result["data"]["name"], "Ada Lovelace");
    assert_eq!(result["side_effects"], json!(["called:crm"]));
    let calls = crm.calls_of("crm.lookup");
    assert_eq!(calls.len(), 1);
    let (auth, body) = &calls[0];
    assert_eq!(
        auth.as_deref(),
        Some(format!("Bearer {CRM_TOKEN}").as_str())
    );
    assert_eq!(body["arguments"], json!({"email": "ada@example.com"}));
    assert_eq!(body["user_id"], json!(w.user));
    assert_eq!(body["space_id"], Value::Null);
    assert!(body["request_id"].as_str().is_some_and(|r| !r.is_empty()));
    // The name models see calls it too.
    let by_wire = execute(
        &base,
        &user,
        "crm__lookup",
        json!({"email": "b@example.com"}),
    )
    .await;
    assert_eq!(by_wire["success"], true, "{by_wire}");
    assert_eq!(by_wire["tool"], "crm.lookup");

    let bad = execute(&base, &user, "crm.lookup", json!({"mail": "x"})).await;
    assert_eq!(bad["error"]["code"], "invalid_arguments", "{bad}");
    assert_eq!(
        crm.calls_of("crm.lookup").len(),
        2,
        "refused before the module"
    );
    // A module acts on the space id it is given, with no row-level security
    // of ours behind it: a space the caller is not a member of is refused
    // before the module hears of it, whatever door the call came through
    // and whatever a replica has cached.
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let (elsewhere, _) = identity::ensure_space(&mut tx, "elsewhere").await.unwrap();
    tx.commit().await.unwrap();
    let ctx = data_plane_registry::ToolContext::new(w.user, Some(elsewhere.id), Permission::User);
    let result = state
        .registry
        .execute_tool(
            "crm.lookup",
            json!({"email": "ada@example.com"}),
            &ctx,
            &data_plane_registry::NoCallbacks,
        )
        .await;
    let error = result.error.expect("refused");
    assert_eq!(
        error.code,
        data_plane_registry::ErrorCode::NotFound,
        "{}",
        error.message
    );
    assert_eq!(
        crm.calls_of("crm.lookup").len(),
        2,
        "refused before the module"
    );
    let denied = execute(&base, &user, "crm.export_all", json!({})).await;
    assert_eq!(denied["error"]["code"], "permission_denied", "{denied}");
    assert!(crm.calls_of("crm.export_all").is_empty());
    let unknown = execute(&base, &user, "crm.lokup", json!({})).await;
    assert_eq!(unknown["error"]["code"], "unknown_tool");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean \"crm.lookup\""),
        "{unknown}"
    );

    // Every failure is a result the model can act on.
    let failed = execute(&base, &user, "crm.fail", json!({})).await;
    assert_eq!(failed["error"]["code"], "module_error", "{failed}");
    assert_eq!(failed["error"]["message"], "module crm: customer not found");
    let garbage = execute(&base, &user, "crm.garbage", json!({})).await;
    assert_eq!(garbage["error"]["code"], "module_error");
    assert!(
        garbage["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON"),
        "{garbage}"
    );
    // The fast module's timeout, then the slow module's.
    let timed_out = execute(&base, &user, "crm.sleepy", json!({"ms": 1500})).await;
    assert_eq!(timed_out["error"]["code"], "timeout", "{timed_out}");
    assert_eq!(timed_out["error"]["retryable"], true);
    assert!(
        timed_out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("within 400 ms")
    );
    let slow = execute(&base, &user, "reports.build", json!({"ms": 1000})).await;
    assert_eq!(slow["success"], true, "{slow}");
    assert_eq!(slow["data"]["slept_ms"], 1000);
    // One retry on a 503 for an idempotent tool, none for the others.
    let retried = execute(&base, &user, "crm.flaky_read", json!({})).await;
    assert_eq!(retried["success"], true, "{retried}");
    assert_eq!(crm.calls_of("crm.flaky_read").len(), 2);
    let not_retried = execute(&base, &user, "crm.flaky_write", json!({})).await;
    assert_eq!(not_retried["error"]["code"], "unavailable", "{not_retried}");
    assert!(
        not_retried["error"]["message"]
            .as_str()
            .unwrap()
            .contains("HTTP 503")
    );
    assert_eq!(crm.calls_of("crm.flaky_write").len(), 1);
    // Rate limits apply to remote tools, and may be set for a configured
    // module's tool before it is discovered.
    let (status, body) = common::json(
        reqwest::Client::new()
            .put(format!("{base}/v1/admin/settings"))
            .bearer_auth(&admin)
            .json(&json!({"tool_rate_limits": {
                "crm.flaky_write": {"daily_limit": 1},
                "late.hello": {"daily_limit": 100}
            }}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let once = execute(&base, &user, "crm.flaky_write", json!({})).await;
    assert_eq!(once["success"], true, "{once}");
    let twice = execute(&base, &user, "crm.flaky_write", json!({})).await;
    assert_eq!(twice["error"]["code"], "rate_limited", "{twice}");
    assert_eq!(crm.calls_of("crm.flaky_write").len(), 2);
    let (status, _) = common::json(
        reqwest::Client::new()
            .put(format!("{base}/v1/admin/settings"))
            .bearer_auth(&admin)
            .json(&json!({"tool_rate_limits": {"nope.hello": {"daily_limit": 1}}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400, "not a configured module");
    // A module not discovered yet has no tools to call.
    let down = execute(&base, &user, "late.hello", json!({})).await;
    assert_eq!(
        down["error"]["code"], "unknown_tool",
        "not discovered yet: {down}"
    );

    // The audit names the module.
    state.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let audited: Vec<(String, Option<String>, bool)> = sqlx::query_as(
        "SELECT tool, module, success FROM tool_calls WHERE tool LIKE 'crm.%' ORDER BY ts, tool",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert!(
        audited.contains(&("crm.lookup".into(), Some("crm".into()), true)),
        "{audited:?}"
    );
    // Every call of a crm tool names the module; the misspelt name ran
    // nothing and names none.
    for (tool, module, _) in &audited {
        let expected = (tool != "crm.lokup").then_some("crm");
        assert_eq!(module.as_deref(), expected, "{tool}");
    }
    assert!(audited.iter().any(|(t, _, _)| t == "crm.lokup"));

    // The module that was down comes up: the next request after the retry
    // pause discovers it lazily.
    let late_listener = late_socket.listen(64).unwrap();
    let late_router = late.router();
    tokio::spawn(async move { axum::serve(late_listener, late_router).await });
    tokio::time::sleep(config.retry_after).await;
    until_listed(
        "late discovered lazily",
        Duration::from_secs(10),
        &base,
        &user,
        "late__hello",
    )
    .await;
    let hello = execute(&base, &user, "late.hello", json!({})).await;
    assert_eq!(hello["success"], true, "{hello}");

    // The manifests are cached in PostgreSQL: a second replica starts with
    // them and asks no module.
    let fetches = crm.manifest_fetches();
    let replica = w.state("", config.clone());
    let replica_base = common::serve(replica.clone()).await;
    until_listed(
        "the replica read the cache",
        Duration::from_secs(10),
        &replica_base,
        &user,
        "crm__lookup",
    )
    .await;
    assert_eq!(
        crm.manifest_fetches(),
        fetches,
        "the replica used the cache"
    );

    // The module's tools change; an admin's refresh on the first replica
    // installs them there at once and reaches the second through the cache.
    let mut changed = crm_manifest();
    changed["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "crm.fail");
    changed["tools"].as_array_mut().unwrap().push(json!({
        "name": "crm.merge", "description": "Merge two customers.",
        "parameters": [{"name": "a", "type": "string", "required": true}, {"name": "b", "type": "string", "required": true}]
    }));
    changed["version"] = json!("2.2");
    crm.set_manifest(changed);
    let (status, body) = post_json(
        &format!("{base}/v1/admin/modules/refresh"),
        &admin,
        &json!({"module": "crm"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["modules"].as_array().unwrap().len(), 1);
    assert_eq!(body["modules"][0]["version"], "2.2");
    let now = listed(&base, &user, "chat").await;
    assert!(now.contains(&"crm__merge".to_string()) && !now.contains(&"crm__fail".to_string()));
    until_listed(
        "the replica follows",
        Duration::from_secs(10),
        &replica_base,
        &user,
        "crm__merge",
    )
    .await;
    assert_eq!(
        crm.manifest_fetches(),
        fetches + 1,
        "one fetch for both replicas"
    );
    let gone = execute(&base, &user, "crm.fail", json!({})).await;
    assert_eq!(gone["error"]["code"], "unknown_tool");

    // A refresh of everything answers every module.
    let (status, body) = post_json(
        &format!("{base}/v1/admin/modules/refresh"),
        &admin,
        &json!({}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["modules"].as_array().unwrap().len(), 4);

    // The CLI shows the cache without a server, and refreshes it.
    let list = format!(
        "crm={crm_base},reports={reports_base},broken={broken_base},late=http://{late_addr}"
    );
    let cli = |args: &'static [&'static str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_data-plane"));
        command
            .env("DATABASE_URL", &w.test.app_url)
            .env("DATABASE_OWNER_URL", &w.test.owner_url)
            .env("DATA_PLANE_MODULES", &list)
            .env("DATA_PLANE_MODULE_TOKEN_CRM", CRM_TOKEN)
            .env("DATA_PLANE_MODULES_SLOW", "reports")
            .env_remove("DATA_PLANE_MODULES_FILE")
            .args(args);
        // The fake modules answer on this runtime: wait off it.
        tokio::task::spawn_blocking(move || command.output().unwrap())
    };
    let fetches = crm.manifest_fetches();
    let shown = cli(&["modules", "--json"]).await.unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let crm_row = shown["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "crm")
        .unwrap()
        .clone();
    assert_eq!(crm_row["state"], "ready", "{shown}");
    assert_eq!(crm_row["version"], "2.2");
    assert!(
        crm_row["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("crm.merge"))
    );
    assert_eq!(crm.manifest_fetches(), fetches, "the CLI read the cache");
    let refreshed = cli(&["modules", "--refresh", "--module", "crm"])
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&refreshed.stdout);
    assert!(
        refreshed.status.success(),
        "{}",
        String::from_utf8_lossy(&refreshed.stderr)
    );
    assert!(
        text.starts_with(&format!("crm  {crm_base}  [ready")),
        "{text}"
    );
    assert!(
        text.contains("    tools: crm.export_all, crm.flaky_read"),
        "{text}"
    );
    assert_eq!(crm.manifest_fetches(), fetches + 1);
    let unknown = cli(&["modules", "--module", "nope"]).await.unwrap();
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("unknown module \"nope\""),
        "{}",
        String::from_utf8_lossy(&unknown.stderr)
    );
}

/// A data-plane process with the service token `peer-token-…` that uses
/// `modules` (`name=url`).
fn peer_process(
    test: &TestDatabase,
    data_dir: &std::path::Path,
    addr: SocketAddr,
    modules: &str,
    token: &str,
) -> Child {
    common::server_process(test, data_dir, addr)
        .env(
            "DATA_PLANE_SERVICE_TOKENS",
            "main=peer-service-token-0123456789",
        )
        .env("DATA_PLANE_MODULES", modules)
        .env("DATA_PLANE_MODULE_TOKEN_MAIN", token)
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn a_data_plane_server_is_a_module_of_another_both_ways() {
    let w = world().await;
    // A document both servers can read (they share the database).
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let (space, _) = identity::ensure_space(&mut tx, "shared").await.unwrap();
    identity::add_member(&mut tx, space.id, w.user, identity::MembershipRole::Viewer)
        .await
        .unwrap();
    let source = data_plane_store::content::ensure_source(
        &mut tx,
        space.id,
        "notes",
        data_plane_store::content::SourceKind::Files,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let doc = data_plane_ingest::pipeline::Pipeline::new(w.test.db.clone(), common::embedder())
        .ingest_file(
            Scope::System,
            data_plane_ingest::pipeline::Target {
                space_id: space.id,
                source_id: source.id,
            },
            "peer.md",
            b"# Peer\n\nBoth servers read this note.\n",
        )
        .await
        .unwrap()
        .document_id;

    // This server: service token for the peer; the peer as module "peer".
    let main_addr = data_plane_testkit::unused_addr();
    let peer_addr = data_plane_testkit::unused_addr();
    let main_token = "main-service-token-0123456789";
    let config = ModulesConfig {
        modules: vec![ModuleConfig {
            token: Some("peer-service-token-0123456789".into()),
            ..module("peer", &format!("http://{peer_addr}"))
        }],
        retry_after: Duration::from_millis(200),
        ..ModulesConfig::default()
    };
    let state = w.state(&format!("peer={main_token}"), config);
    let base = serve_router(data_plane::http::app(state.clone()), main_addr).await;
    // The peer uses this server as its module "main".
    let data_dir = tempfile::tempdir().unwrap();
    let _peer = common::KillOnDrop(peer_process(
        &w.test,
        data_dir.path(),
        peer_addr,
        &format!("main={base}"),
        main_token,
    ));
    let peer_base = format!("http://{peer_addr}");
    let user = w.user_token();
    eventually("the peer serves", Duration::from_secs(120), || async {
        reqwest::get(format!("{peer_base}/healthz"))
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;

    // This server lists the peer's own tools, and not the peer's copies of
    // this server's tools (which would echo back and forth).
    until_listed(
        "the peer discovered",
        Duration::from_secs(30),
        &base,
        &user,
        "peer__document_info",
    )
    .await;
    let tools = listed(&base, &user, "chat").await;
    assert!(
        tools.contains(&"peer__search_documents".to_string()),
        "{tools:?}"
    );
    assert!(
        tools.iter().all(|t| !t.starts_with("peer__main")),
        "{tools:?}"
    );

    // A call routed to the peer runs there for the same user, under its
    // permission checks: a space the user reads, and one it does not.
    let (status, info) = post_json(
        &format!("{base}/v1/tools/peer.document_info/execute"),
        &user,
        &json!({"args": {"document_id": doc}, "spaceId": space.id}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(info["success"], true, "{info}");
    assert_eq!(info["tool"], "peer.document_info");
    assert_eq!(info["data"]["path"], "peer.md");
    let (_, missing) = post_json(
        &format!("{base}/v1/tools/peer.read_document/execute"),
        &user,
        &json!({"args": {"document_id": Uuid::new_v4()}}),
    )
    .await;
    assert_eq!(missing["success"], false);
    assert_eq!(missing["error"]["code"], "not_found", "{missing}");

    // The other way: the peer's manifest offers this server's tools as
    // main.*, and its /execute routes them here.
    let peer_manifest: Value = reqwest::Client::new()
        .get(format!("{peer_base}/manifest"))
        .bearer_auth("peer-service-token-0123456789")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = peer_manifest["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"main.document_info"), "{names:?}");
    assert!(names.contains(&"document_info"));
    let (status, routed) = post_json(
        &format!("{peer_base}/execute"),
        "peer-service-token-0123456789",
        &json!({"tool_name": "main.document_info", "arguments": {"document_id": doc},
                "user_id": w.user, "request_id": "req-both-ways"}),
    )
    .await;
    assert_eq!(status, 200, "{routed}");
    assert_eq!(routed["success"], true, "{routed}");
    assert_eq!(routed["tool"], "main.document_info");
    assert_eq!(routed["data"]["path"], "peer.md");

    // Both audits hold the call under the same request id: the peer's as
    // main.document_info, this server's as document_info.
    state.ledger.flush().await;
    eventually("both audited", Duration::from_secs(10), || async {
        let mut tx = w.test.db.begin(Scope::System).await.unwrap();
        let rows: Vec<(String, Option<String>)> = sqlx::query_as(
            "SELECT tool, module FROM tool_calls WHERE request_id = 'req-both-ways' ORDER BY tool",
        )
        .fetch_all(&mut *tx)
        .await
        .unwrap();
        tx.commit().await.unwrap();
        rows == [
            ("document_info".to_string(), None),
            ("main.document_info".to_string(), Some("main".to_string())),
        ]
    })
    .await;
}

#[tokio::test]
async fn a_chat_turn_calls_a_remote_tool_and_streams_it() {
    let w = world().await;
    let crm = FakeModule::new("crm", crm_manifest());
    let crm_base = serve_router(crm.router(), "127.0.0.1:0".parse().unwrap()).await;
    let config = ModulesConfig {
        modules: vec![ModuleConfig {
            token: Some(CRM_TOKEN.into()),
            ..module("crm", &crm_base)
        }],
        ..ModulesConfig::default()
    };
    let state = w.state("", config);
    let model = FakeModel::start().await;
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_model_crm",
        name: "crm__lookup",
        fragments: &["{\"email\": ", "\"ada@example.com\"}"],
    }]));
    model.push(text_reply(&["Ada is a gold customer."]));
    let mut agent = AgentConfig::new(model.base_url(), "test-model");
    agent.api_key = Some("sk-test".into());
    agent.max_steps = 4;
    let base = common::serve(state.with_agent(agent).unwrap()).await;

    let user = w.user_token();
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/chat"))
        .bearer_auth(&user)
        .json(&json!({"messages": [{"role": "user", "content": "who is ada@example.com?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut stream = eventsource_stream::EventStream::new(r.bytes_stream());
    let mut events = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(e) = stream.next().await {
            events.push(serde_json::from_str::<Value>(&e.unwrap().data).unwrap());
        }
    })
    .await
    .unwrap();
    let call = events
        .iter()
        .find(|e| e["type"] == "tool_call" && e["partial"] == false)
        .unwrap_or_else(|| panic!("no tool call in {events:?}"));
    assert_eq!(call["name"], "crm.lookup");
    // The fragments too, though the model wrote crm__lookup.
    let names: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call")
        .map(|e| &e["name"])
        .collect();
    assert!(
        names.len() > 1 && names.iter().all(|n| *n == "crm.lookup"),
        "{names:?}"
    );
    assert_eq!(call["arguments"], json!({"email": "ada@example.com"}));
    let result = events.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert_eq!(result["call_id"], "call_model_crm");
    assert_eq!(result["result"]["success"], true, "{result}");
    assert_eq!(result["result"]["data"]["tier"], "gold");
    assert_eq!(events.last().unwrap()["type"], "done");
    // The model was offered the remote tool under its function name, and
    // got its result back.
    let requests = model.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"crm__lookup"), "{offered:?}");
    let fed_back = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(fed_back["role"], "tool");
    assert!(
        fed_back["content"]
            .as_str()
            .unwrap()
            .contains("Ada Lovelace")
    );
    assert_eq!(crm.calls_of("crm.lookup").len(), 1);

    // With tool search, the discovery meta-tools find remote tools too.
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_model_search",
        name: "search_tools",
        fragments: &["{\"query\": \"look up a customer by email\"}"],
    }]));
    model.push(text_reply(&["crm.lookup it is."]));
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/chat"))
        .bearer_auth(&user)
        .json(
            &json!({"messages": [{"role": "user", "content": "which tool?"}],
                      "options": {"toolSearch": true}}),
        )
        .send()
        .await
        .unwrap();
    let mut stream = eventsource_stream::EventStream::new(r.bytes_stream());
    let mut found = Value::Null;
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(e) = stream.next().await {
            let e: Value = serde_json::from_str(&e.unwrap().data).unwrap();
            if e["type"] == "tool_result" {
                found = e["result"]["data"].clone();
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(found["tools"][0]["name"], "crm.lookup", "{found}");
    assert_eq!(found["tools"][0]["category"], "module");
}

#[tokio::test]
async fn an_expired_manifest_is_fetched_again_and_oversized_or_refused_ones_say_why() {
    let w = world().await;
    let fresh = FakeModule::new(
        "fresh",
        json!({"name": "fresh", "tools": [{"name": "fresh.ping", "description": "Answers."}]}),
    );
    let fresh_base = serve_router(fresh.router(), "127.0.0.1:0".parse().unwrap()).await;
    // Over the 1 MiB a manifest may be.
    let padding = "x".repeat(1024 * 1024);
    let big = FakeModule::new(
        "big",
        json!({"name": "big", "description": padding, "tools": []}),
    );
    let big_base = serve_router(big.router(), "127.0.0.1:0".parse().unwrap()).await;
    // crm wants its token; this configuration has none.
    let crm = FakeModule::new("crm", crm_manifest());
    let crm_base = serve_router(crm.router(), "127.0.0.1:0".parse().unwrap()).await;
    let config = ModulesConfig {
        modules: vec![
            module("fresh", &fresh_base),
            module("big", &big_base),
            module("crm", &crm_base),
        ],
        ttl: Duration::from_millis(1500),
        retry_after: Duration::from_millis(100),
        ..ModulesConfig::default()
    };
    let state = w.state("", config);
    let base = common::serve(state).await;
    let (user, admin) = (w.user_token(), w.admin_token());
    eventually("all tried", Duration::from_secs(10), || async {
        let big = module_status(&base, &admin, "big").await;
        let crm = module_status(&base, &admin, "crm").await;
        let fresh = module_status(&base, &admin, "fresh").await;
        big["state"] == "failed" && crm["state"] == "failed" && fresh["state"] == "ready"
    })
    .await;
    let big_status = module_status(&base, &admin, "big").await;
    assert!(
        big_status["last_error"]
            .as_str()
            .unwrap()
            .contains("larger than 1048576 bytes"),
        "{big_status}"
    );
    let crm_status = module_status(&base, &admin, "crm").await;
    assert!(
        crm_status["last_error"]
            .as_str()
            .unwrap()
            .contains("HTTP 401"),
        "{crm_status}"
    );
    assert_eq!(fresh.manifest_fetches(), 1);

    // Past the TTL the tools keep serving while a request has the module
    // asked again in the background.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert_eq!(
        module_status(&base, &admin, "fresh").await["state"],
        "stale"
    );
    assert!(
        listed(&base, &user, "chat")
            .await
            .contains(&"fresh__ping".to_string())
    );
    eventually("fetched again", Duration::from_secs(10), || async {
        fresh.manifest_fetches() == 2
    })
    .await;
    eventually("fresh again", Duration::from_secs(10), || async {
        module_status(&base, &admin, "fresh").await["state"] == "ready"
    })
    .await;
    let ping = execute(&base, &user, "fresh.ping", json!({})).await;
    assert_eq!(ping["success"], true, "{ping}");
}
