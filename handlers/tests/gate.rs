//! The eval gate through the real registry and the PostgreSQL ledger: a gate
//! that allows, blocks, asks, fails or is too slow (fail-open at 2 s on the
//! real clock), no gate at all, tools that do not pass it, and the HTTP gate
//! against a fake evaluation service; every call's audit row holds the
//! gate's verdict. Then how the rate limits count the calls the gate or a
//! person judges: a call the gate blocks, a person denies or nobody can
//! approve is not counted; one over its limit reaches neither the gate nor
//! a person; one approved after another took the day's last is refused.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use data_plane_handlers::{HttpGate, PgLedger};
use data_plane_registry::gate::{GateChain, PolicyGate};
use data_plane_registry::{
    AnnotationHints, Approval, ApprovalRequest, Approver, Callbacks, Category, CostTier,
    DefinitionFile, ErrorCode, Gate, GateCall, GateDecision, GateError, HandlerEntry, NoCallbacks,
    Permission, RateLimits, Registry, ToolContext, ToolError, ToolHandler, ToolMeta, ToolResult,
};
use data_plane_store::Scope;
use data_plane_store::identity;
use data_plane_store::testing::TestDatabase;
use data_plane_testkit::http::{Request, Response, Server};
use serde_json::{Value, json};
use uuid::Uuid;

/// The number of times the handlers ran.
#[derive(Default)]
struct Runs(AtomicUsize);

/// Counts its calls and echoes its arguments.
struct Counted(Arc<Runs>);

#[async_trait]
impl ToolHandler for Counted {
    async fn call(
        &self,
        args: Value,
        _ctx: &ToolContext,
        _callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        self.0.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!({ "echo": args }))
    }
}

fn tool(name: &'static str, requires_gate: bool, runs: &Arc<Runs>) -> HandlerEntry {
    HandlerEntry {
        name,
        file: "handlers/tests/gate.rs",
        meta: ToolMeta {
            category: Category::Web,
            short_description: "a tool of the gate tests",
            available_when: "always",
            aliases: &[],
            annotations: AnnotationHints::DERIVED,
            cost: CostTier::Expensive,
            permission: Permission::User,
            timeout: Duration::from_secs(10),
            limits: RateLimits::NONE,
            requires_gate,
            defer_loading: false,
            tag: None,
        },
        available: |_| true,
        shape: None,
        asks: None,
        handler: Arc::new(Counted(runs.clone())),
        args_schema: json!({}),
        output_schema: None,
    }
}

fn definition(name: &str) -> DefinitionFile {
    let value = json!({
        "name": name,
        "description": format!("The {name} tool of the gate tests."),
        "parameters": {
            "type": "object",
            "properties": { "url": { "type": "string", "description": "Anything." } },
            "additionalProperties": false
        }
    });
    DefinitionFile {
        file: format!("definitions/{name}.json"),
        text: value.to_string(),
    }
}

/// A database with one user, a registry of a gated tool ("gated") and one
/// that is not ("plain"), and a count of the handlers' runs.
struct World {
    test: TestDatabase,
    ledger: PgLedger,
    user: Uuid,
    runs: Arc<Runs>,
}

impl World {
    async fn new() -> World {
        let test = TestDatabase::create().await;
        let mut tx = test.db.begin(Scope::System).await.unwrap();
        let user = identity::upsert_user(&mut tx, "gated@example.com", Some(Permission::User))
            .await
            .unwrap()
            .id;
        tx.commit().await.unwrap();
        let ledger = PgLedger::start(test.db.clone());
        World {
            test,
            ledger,
            user,
            runs: Arc::default(),
        }
    }

    fn registry(&self, gate: Option<Arc<dyn Gate>>) -> Registry {
        let handlers = vec![
            tool("gated", true, &self.runs),
            tool("plain", false, &self.runs),
        ];
        let definitions = handlers.iter().map(|h| definition(h.name)).collect();
        let registry =
            Registry::build(definitions, handlers, Arc::new(self.ledger.clone())).unwrap();
        match gate {
            Some(gate) => registry.with_gate(gate),
            None => registry,
        }
    }

    fn ctx(&self, call_id: &str) -> ToolContext {
        ToolContext::new(self.user, None, Permission::User)
            .with_request_id("req-gate")
            .with_call_id(call_id)
    }

    async fn call(&self, registry: &Registry, tool: &str, call_id: &str) -> ToolResult {
        registry
            .execute_tool(
                tool,
                json!({ "url": "https://example.org/" }),
                &self.ctx(call_id),
                &NoCallbacks,
            )
            .await
    }

    fn runs(&self) -> usize {
        self.runs.0.load(Ordering::SeqCst)
    }

    /// The `gate` column of the call's audit row.
    async fn audited_gate(&self, call_id: &str) -> Option<String> {
        self.ledger.flush().await;
        let mut tx = self.test.db.begin(Scope::System).await.unwrap();
        sqlx::query_scalar("SELECT gate FROM tool_calls WHERE call_id = $1")
            .bind(call_id)
            .fetch_one(&mut *tx)
            .await
            .unwrap()
    }
}

/// Answers every call the same way and remembers the tools it was asked about.
struct Fixed {
    answer: Result<GateDecision, GateError>,
    delay: Duration,
    asked: Mutex<Vec<String>>,
}

impl Fixed {
    fn new(answer: Result<GateDecision, GateError>) -> Arc<Fixed> {
        Fixed::slow(answer, Duration::ZERO)
    }

    fn slow(answer: Result<GateDecision, GateError>, delay: Duration) -> Arc<Fixed> {
        Arc::new(Fixed {
            answer,
            delay,
            asked: Mutex::default(),
        })
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Gate for Fixed {
    async fn check(&self, call: &GateCall<'_>) -> Result<GateDecision, GateError> {
        self.asked.lock().unwrap().push(format!(
            "{} {} {}",
            call.entry.name, call.args, call.entry.annotations.open_world
        ));
        tokio::time::sleep(self.delay).await;
        self.answer.clone()
    }
}

fn assert_ran(r: &ToolResult) {
    assert!(r.success, "{r:?}");
    assert_eq!(
        r.data.as_ref().unwrap()["echo"]["url"],
        "https://example.org/"
    );
}

fn assert_refused(r: &ToolResult, code: ErrorCode, message: &str) {
    assert!(!r.success, "{r:?}");
    let error = r.error.as_ref().unwrap();
    assert_eq!(error.code, code, "{r:?}");
    assert_eq!(error.message, message);
    assert!(!error.retryable, "{r:?}");
}

#[tokio::test]
async fn an_allowed_call_runs_and_is_audited_allow() {
    let w = World::new().await;
    let gate = Fixed::new(Ok(GateDecision::Allow));
    let registry = w.registry(Some(gate.clone()));
    assert_ran(&w.call(&registry, "gated", "call-allow").await);
    assert_eq!(w.runs(), 1);
    assert_eq!(
        gate.asked(),
        [r#"gated {"url":"https://example.org/"} true"#]
    );
    assert_eq!(w.audited_gate("call-allow").await.as_deref(), Some("allow"));
}

#[tokio::test]
async fn a_blocked_call_fails_with_the_reason_and_never_runs() {
    let w = World::new().await;
    let gate = Fixed::new(Ok(GateDecision::Deny {
        reason: "the evaluator flagged the URL".into(),
    }));
    let registry = w.registry(Some(gate));
    let r = w.call(&registry, "gated", "call-deny").await;
    assert_refused(
        &r,
        ErrorCode::Blocked,
        "gated was blocked by the eval gate: the evaluator flagged the URL",
    );
    assert_eq!(
        serde_json::to_value(&r).unwrap()["error"]["code"],
        "blocked"
    );
    assert_eq!(w.runs(), 0);
    assert_eq!(w.audited_gate("call-deny").await.as_deref(), Some("deny"));
}

#[tokio::test]
async fn a_call_the_gate_asks_about_needs_approval_and_does_not_run() {
    let w = World::new().await;
    let gate = Fixed::new(Ok(GateDecision::Ask {
        reason: "a person reviews expensive calls".into(),
    }));
    let registry = w.registry(Some(gate));
    let r = w.call(&registry, "gated", "call-ask").await;
    assert_refused(
        &r,
        ErrorCode::ApprovalRequired,
        "gated needs a person's approval before it runs, and nobody can give it here: a person reviews expensive calls",
    );
    assert_eq!(w.runs(), 0);
    assert_eq!(w.audited_gate("call-ask").await.as_deref(), Some("ask"));
}

/// A client that asked for a call's log lines hears the gate's decision,
/// at a level that says how much it matters.
#[tokio::test]
async fn the_gates_decision_is_a_log_line_of_the_call() {
    use data_plane_registry::{ChannelCallbacks, LogLevel, Report};
    let w = World::new().await;
    let cases = [
        (
            Ok(GateDecision::Allow),
            LogLevel::Info,
            "the eval gate allowed the call",
        ),
        (
            Ok(GateDecision::Deny {
                reason: "flagged".into(),
            }),
            LogLevel::Warning,
            "gated was blocked by the eval gate: flagged",
        ),
        (
            Ok(GateDecision::Ask {
                reason: "a person reviews it".into(),
            }),
            LogLevel::Notice,
            "the eval gate asks a person to approve the call: a person reviews it",
        ),
        (
            Err(GateError::new("down")),
            LogLevel::Warning,
            "the eval gate could not judge the call (it failed or did not answer in time); the call runs",
        ),
    ];
    for (i, (answer, level, message)) in cases.into_iter().enumerate() {
        let registry = w.registry(Some(Fixed::new(answer)));
        let (callbacks, mut reports) = ChannelCallbacks::<Report>::channel();
        let call_id = format!("call-log-{i}");
        registry
            .execute_tool(
                "gated",
                json!({ "url": "https://example.org/" }),
                &w.ctx(&call_id),
                &callbacks,
            )
            .await;
        let mut lines = Vec::new();
        while let Ok(report) = reports.try_recv() {
            if let Report::Log(line) = report {
                assert_eq!(line.call_id, call_id);
                lines.push((line.level, line.message));
            }
        }
        // Started, the gate, then how it ended.
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[1], (level, message.to_string()), "{lines:?}");
    }
}

#[tokio::test]
async fn a_gate_that_fails_lets_the_call_run() {
    let w = World::new().await;
    let gate = Fixed::new(Err(GateError::new("the evaluator is down")));
    let registry = w.registry(Some(gate));
    assert_ran(&w.call(&registry, "gated", "call-error").await);
    assert_eq!(w.runs(), 1);
    assert_eq!(
        w.audited_gate("call-error").await.as_deref(),
        Some("fail_open")
    );
}

#[tokio::test]
async fn a_gate_slower_than_two_seconds_lets_the_call_run_at_two_seconds() {
    let w = World::new().await;
    // It would block the call, had it answered in time.
    let gate = Fixed::slow(
        Ok(GateDecision::Deny {
            reason: "too late".into(),
        }),
        Duration::from_secs(3),
    );
    let registry = w.registry(Some(gate));
    let started = Instant::now();
    let r = w.call(&registry, "gated", "call-slow").await;
    let elapsed = started.elapsed();
    assert_ran(&r);
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    assert_eq!(w.runs(), 1);
    assert_eq!(
        w.audited_gate("call-slow").await.as_deref(),
        Some("fail_open")
    );
}

#[tokio::test]
async fn without_a_gate_every_call_runs() {
    let w = World::new().await;
    let registry = w.registry(None);
    assert_ran(&w.call(&registry, "gated", "call-no-gate").await);
    assert_eq!(w.runs(), 1);
    assert_eq!(w.audited_gate("call-no-gate").await, None);
}

#[tokio::test]
async fn a_tool_that_does_not_require_the_gate_never_reaches_it() {
    let w = World::new().await;
    let gate = Fixed::new(Ok(GateDecision::Deny {
        reason: "everything is blocked".into(),
    }));
    let registry = w.registry(Some(gate.clone()));
    assert_ran(&w.call(&registry, "plain", "call-plain").await);
    assert!(gate.asked().is_empty(), "{:?}", gate.asked());
    assert_eq!(w.audited_gate("call-plain").await, None);
    // A call refused before the gate (here: invalid arguments) never reaches it either.
    let r = registry
        .execute_tool(
            "gated",
            json!({ "uri": "x" }),
            &w.ctx("call-invalid"),
            &NoCallbacks,
        )
        .await;
    assert_eq!(r.code(), Some(ErrorCode::InvalidArguments), "{r:?}");
    assert!(gate.asked().is_empty(), "{:?}", gate.asked());
    assert_eq!(w.audited_gate("call-invalid").await, None);
}

/// A fake evaluation service: answers every request with `respond` and
/// keeps the requests.
async fn service(
    respond: impl Fn() -> Response + Send + Sync + 'static,
) -> (Server, Arc<Mutex<Vec<Request>>>) {
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    let kept = seen.clone();
    let server = Server::start(move |request: Request| {
        kept.lock().unwrap().push(request);
        respond()
    })
    .await;
    (server, seen)
}

/// How a call is refused: its error code and message; `None`: it runs.
type Refusal = Option<(ErrorCode, &'static str)>;

/// What a fake service does with each request.
type Respond = Box<dyn Fn() -> Response + Send + Sync>;

fn answer(status: u16, body: &str) -> Response {
    Response::whole(
        status,
        vec![("content-type".into(), "application/json".into())],
        body.as_bytes().to_vec(),
    )
}

#[tokio::test]
async fn the_http_gate_posts_the_call_and_follows_the_answer() {
    let w = World::new().await;
    // (answer, expected error code and message, audit verdict)
    let cases: [(&str, Refusal, &str); 4] = [
        (r#"{"decision": "allow"}"#, None, "allow"),
        (
            r#"{"decision": "deny", "reason": "the domain is on the block list"}"#,
            Some((
                ErrorCode::Blocked,
                "gated was blocked by the eval gate: the domain is on the block list",
            )),
            "deny",
        ),
        (
            r#"{"decision": "deny"}"#,
            Some((
                ErrorCode::Blocked,
                "gated was blocked by the eval gate: the evaluation service gave no reason",
            )),
            "deny",
        ),
        (
            r#"{"decision": "ask", "reason": "first visit to this site"}"#,
            Some((
                ErrorCode::ApprovalRequired,
                "gated needs a person's approval before it runs, and nobody can give it here: first visit to this site",
            )),
            "ask",
        ),
    ];
    for (i, (body, refusal, verdict)) in cases.into_iter().enumerate() {
        let (server, seen) = service(move || answer(200, body)).await;
        let gate = HttpGate::new(&server.url("/evaluate"), Some("s3cret".into())).unwrap();
        let registry = w.registry(Some(Arc::new(gate)));
        let call_id = format!("call-http-{i}");
        let runs_before = w.runs();
        let r = w.call(&registry, "gated", &call_id).await;
        match refusal {
            None => {
                assert_ran(&r);
                assert_eq!(w.runs(), runs_before + 1);
            }
            Some((code, message)) => {
                assert_refused(&r, code, message);
                assert_eq!(w.runs(), runs_before);
            }
        }
        assert_eq!(w.audited_gate(&call_id).await.as_deref(), Some(verdict));

        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{body}");
        let request = &seen[0];
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/evaluate")
        );
        assert_eq!(request.header("authorization"), Some("Bearer s3cret"));
        let posted: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            posted,
            json!({
                "tool": "gated",
                "category": "web",
                "cost": "expensive",
                "annotations": {
                    "read_only": true,
                    "destructive": false,
                    "idempotent": false,
                    "open_world": true,
                    "requires_confirmation": false
                },
                "permission": "user",
                "caller_permission": "user",
                "arguments": { "url": "https://example.org/" },
                "arguments_cut": [],
                "user_id": w.user,
                "space_id": null,
                "request_id": "req-gate",
                "call_id": call_id,
                "agent": null
            })
        );
    }
}

#[tokio::test]
async fn the_http_gate_fails_open_when_the_service_does_not_answer_well() {
    let w = World::new().await;
    let refused_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    // (what the service does, the most the call may take)
    let cases: Vec<(&str, Respond, Duration)> = vec![
        (
            "a 500",
            Box::new(|| answer(500, r#"{"decision": "deny", "reason": "x"}"#)),
            Duration::from_secs(1),
        ),
        (
            "garbage",
            Box::new(|| answer(200, "<html>not json</html>")),
            Duration::from_secs(1),
        ),
        (
            "an unknown decision",
            Box::new(|| answer(200, r#"{"decision": "maybe"}"#)),
            Duration::from_secs(1),
        ),
        (
            "a redirect",
            Box::new(|| {
                Response::whole(
                    302,
                    vec![("location".into(), "http://127.0.0.1:9/".into())],
                    Vec::new(),
                )
            }),
            Duration::from_secs(1),
        ),
        (
            "an answer after 3 s",
            Box::new(|| {
                Response::Delayed(
                    Duration::from_secs(3),
                    Box::new(answer(200, r#"{"decision": "deny", "reason": "late"}"#)),
                )
            }),
            Duration::from_secs(3),
        ),
    ];
    for (i, (what, respond, at_most)) in cases.into_iter().enumerate() {
        let (server, seen) = service(respond).await;
        let gate = HttpGate::new(&server.url("/"), None).unwrap();
        let registry = w.registry(Some(Arc::new(gate)));
        let call_id = format!("call-open-{i}");
        let started = Instant::now();
        let r = w.call(&registry, "gated", &call_id).await;
        let elapsed = started.elapsed();
        assert_ran(&r);
        assert!(elapsed < at_most, "{what}: {elapsed:?}");
        assert_eq!(seen.lock().unwrap().len(), 1, "{what}");
        assert_eq!(seen.lock().unwrap()[0].header("authorization"), None);
        assert_eq!(
            w.audited_gate(&call_id).await.as_deref(),
            Some("fail_open"),
            "{what}"
        );
    }

    // Nobody listening at all.
    let gate = HttpGate::new(&format!("http://127.0.0.1:{refused_port}/"), None).unwrap();
    let registry = w.registry(Some(Arc::new(gate)));
    assert_ran(&w.call(&registry, "gated", "call-open-refused").await);
    assert_eq!(
        w.audited_gate("call-open-refused").await.as_deref(),
        Some("fail_open")
    );
}

#[test]
fn the_http_gate_refuses_a_url_it_cannot_post_to() {
    for url in ["", "not a url", "ftp://example.org/", "file:///etc/passwd"] {
        let e = HttpGate::new(url, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("gate URL {url:?} is not a valid http or https URL")
        );
    }
}

#[tokio::test]
async fn the_http_gate_sees_only_what_the_policy_allows() {
    let w = World::new().await;
    let (server, seen) =
        service(|| answer(200, r#"{"decision": "deny", "reason": "from the service"}"#)).await;
    let policy = PolicyGate::parse(
        "gate.json",
        &json!({
            "rules": [
                { "effect": "deny", "reason": "sub-agents stay off the web", "agents": ["document_analyst"] }
            ]
        })
        .to_string(),
        &["gated", "plain"],
    )
    .unwrap();
    let chain = GateChain::new(vec![
        Arc::new(policy),
        Arc::new(HttpGate::new(&server.url("/"), None).unwrap()),
    ]);
    let registry = w.registry(Some(Arc::new(chain)));

    let mut analyst = w.ctx("call-chain-analyst");
    analyst.agent = Some(Arc::from("document_analyst"));
    let r = registry
        .execute_tool("gated", json!({}), &analyst, &NoCallbacks)
        .await;
    assert_refused(
        &r,
        ErrorCode::Blocked,
        "gated was blocked by the eval gate: sub-agents stay off the web",
    );
    assert!(seen.lock().unwrap().is_empty(), "the policy decided alone");

    let r = w.call(&registry, "gated", "call-chain-user").await;
    assert_refused(
        &r,
        ErrorCode::Blocked,
        "gated was blocked by the eval gate: from the service",
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(w.runs(), 0);
}

// How the rate limits count the calls the gate or a person judges.

/// `tool`'s entry with rate limits and, when `confirm`, the annotation
/// that makes a person approve each call.
fn limited(
    name: &'static str,
    limits: RateLimits,
    confirm: bool,
    requires_gate: bool,
    runs: &Arc<Runs>,
) -> HandlerEntry {
    let mut entry = tool(name, requires_gate, runs);
    entry.meta.limits = limits;
    entry.meta.annotations.requires_confirmation = Some(confirm);
    entry
}

const TWICE_A_DAY: RateLimits = RateLimits {
    cooldown: None,
    daily_limit: Some(2),
};

impl World {
    /// A registry of limited tools: "confirmed" and "confirmed_cooling" ask
    /// a person, "gated_twice" passes the gate.
    fn limited_registry(&self, gate: Arc<dyn Gate>) -> Arc<Registry> {
        let cooling = RateLimits {
            cooldown: Some(Duration::from_secs(60)),
            daily_limit: None,
        };
        let handlers = vec![
            limited("confirmed", TWICE_A_DAY, true, false, &self.runs),
            limited("confirmed_cooling", cooling, true, false, &self.runs),
            limited("gated_twice", TWICE_A_DAY, false, true, &self.runs),
        ];
        let definitions = handlers.iter().map(|h| definition(h.name)).collect();
        let registry =
            Registry::build(definitions, handlers, Arc::new(self.ledger.clone())).unwrap();
        Arc::new(registry.with_gate(gate))
    }

    fn asking(&self, approver: Arc<dyn Approver>) -> ToolContext {
        let mut ctx = self.ctx("call-limited");
        ctx.approver = Some(approver);
        ctx
    }

    /// Today's count of the user's calls of `tool` in the ledger.
    async fn counted(&self, tool: &str) -> i32 {
        let mut tx = self.test.db.begin(Scope::System).await.unwrap();
        sqlx::query_scalar::<_, i32>(
            "SELECT count FROM rate_limits
              WHERE user_id = $1 AND tool = $2 AND day = (now() AT TIME ZONE 'utc')::date",
        )
        .bind(self.user)
        .bind(tool)
        .fetch_optional(&mut *tx)
        .await
        .unwrap()
        .unwrap_or(0)
    }
}

async fn run(registry: &Registry, tool: &str, ctx: &ToolContext) -> ToolResult {
    registry
        .execute_tool(tool, json!({}), ctx, &NoCallbacks)
        .await
}

fn assert_code(r: &ToolResult, code: ErrorCode, says: &str) {
    assert!(!r.success, "{r:?}");
    let error = r.error.as_ref().unwrap();
    assert_eq!(error.code, code, "{r:?}");
    assert!(
        error.message.contains(says),
        "{:?} lacks {says:?}",
        error.message
    );
}

/// Approves or denies as told, and counts how often it was asked.
#[derive(Default)]
struct Person {
    approves: AtomicBool,
    asked: AtomicUsize,
}

impl Person {
    fn answers(&self, approves: bool) {
        self.approves.store(approves, Ordering::SeqCst);
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Approver for Person {
    async fn approve(&self, _request: ApprovalRequest<'_>) -> Approval {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if self.approves.load(Ordering::SeqCst) {
            Approval::Approved
        } else {
            Approval::Denied {
                reason: "the user said no".into(),
            }
        }
    }
}

/// While it is asked, another call of the same tool by the same user runs
/// (and takes the day's last call); then it approves.
struct Overtaken {
    registry: Arc<Registry>,
    other: ToolContext,
}

#[async_trait]
impl Approver for Overtaken {
    async fn approve(&self, request: ApprovalRequest<'_>) -> Approval {
        let other = run(&self.registry, &request.entry.name, &self.other).await;
        assert!(other.success, "{other:?}");
        Approval::Approved
    }
}

#[tokio::test]
async fn a_denied_call_is_not_counted_and_one_over_the_limit_asks_nobody() {
    let w = World::new().await;
    let registry = w.limited_registry(Fixed::new(Ok(GateDecision::Allow)));
    let person = Arc::new(Person::default());
    let ctx = w.asking(person.clone());

    // Three denials: nothing ran, nothing counted.
    for _ in 0..3 {
        let denied = run(&registry, "confirmed", &ctx).await;
        assert_code(&denied, ErrorCode::ApprovalRequired, "was not approved");
    }
    assert_eq!(person.asked(), 3);
    assert_eq!(w.counted("confirmed").await, 0);

    // The day's two calls are all still there; the third asks nobody.
    person.answers(true);
    for _ in 0..2 {
        assert!(run(&registry, "confirmed", &ctx).await.success);
    }
    let over = run(&registry, "confirmed", &ctx).await;
    assert_code(
        &over,
        ErrorCode::RateLimited,
        "confirmed may be called 2 times per day",
    );
    assert_eq!(person.asked(), 5, "a call over its limit asks nobody");
    assert_eq!(w.runs(), 2);
    assert_eq!(w.counted("confirmed").await, 2);

    // A denial starts no cooldown: the next call, approved, runs at once;
    // the one after it, in its cooldown, asks nobody.
    person.answers(false);
    let denied = run(&registry, "confirmed_cooling", &ctx).await;
    assert_code(&denied, ErrorCode::ApprovalRequired, "was not approved");
    person.answers(true);
    assert!(run(&registry, "confirmed_cooling", &ctx).await.success);
    let cooling = run(&registry, "confirmed_cooling", &ctx).await;
    assert_code(
        &cooling,
        ErrorCode::RateLimited,
        "ms before calling it again",
    );
    assert_eq!(person.asked(), 7);
    assert_eq!(w.counted("confirmed_cooling").await, 1);
}

#[tokio::test]
async fn a_call_nobody_can_approve_is_not_counted() {
    let w = World::new().await;
    let registry = w.limited_registry(Fixed::new(Ok(GateDecision::Allow)));
    for _ in 0..3 {
        let refused = run(&registry, "confirmed", &w.ctx("call-nobody")).await;
        assert_code(&refused, ErrorCode::ApprovalRequired, "nobody can give it");
    }
    assert_eq!(w.counted("confirmed").await, 0);
    assert_eq!(w.runs(), 0);
}

#[tokio::test]
async fn a_blocked_call_is_not_counted_and_one_over_the_limit_never_reaches_the_gate() {
    let w = World::new().await;
    let ctx = w.ctx("call-gated-twice");
    let blocking = Fixed::new(Ok(GateDecision::Deny {
        reason: "not today".into(),
    }));
    let registry = w.limited_registry(blocking.clone());
    for _ in 0..3 {
        let blocked = run(&registry, "gated_twice", &ctx).await;
        assert_code(&blocked, ErrorCode::Blocked, "not today");
    }
    assert_eq!(blocking.asked().len(), 3);
    assert_eq!(w.counted("gated_twice").await, 0);

    // The same ledger behind a gate that allows: both of the day's calls run.
    let allowing = Fixed::new(Ok(GateDecision::Allow));
    let registry = w.limited_registry(allowing.clone());
    for _ in 0..2 {
        assert!(run(&registry, "gated_twice", &ctx).await.success);
    }
    let over = run(&registry, "gated_twice", &ctx).await;
    assert_code(&over, ErrorCode::RateLimited, "2 times per day");
    assert_eq!(
        allowing.asked().len(),
        2,
        "a call over its limit never reaches the gate"
    );
    assert_eq!(w.counted("gated_twice").await, 2);
}

#[tokio::test]
async fn a_call_approved_after_another_took_the_last_one_is_refused() {
    let w = World::new().await;
    let registry = w.limited_registry(Fixed::new(Ok(GateDecision::Allow)));
    let person = Arc::new(Person::default());
    person.answers(true);
    assert!(
        run(&registry, "confirmed", &w.asking(person.clone()))
            .await
            .success
    );

    // One call left today. While this call waits for its approval, another
    // call of the same user takes it.
    let overtaken = Arc::new(Overtaken {
        registry: registry.clone(),
        other: w.asking(person.clone()),
    });
    let late = run(&registry, "confirmed", &w.asking(overtaken)).await;
    assert_code(
        &late,
        ErrorCode::RateLimited,
        "confirmed may be called 2 times per day",
    );
    assert_eq!(w.runs(), 2, "the limit holds");
    assert_eq!(w.counted("confirmed").await, 2);
}

#[tokio::test]
async fn a_daily_limit_of_zero_lets_no_call_run_not_even_the_first() {
    let w = World::new().await;
    let zero = RateLimits {
        cooldown: None,
        daily_limit: Some(0),
    };
    let allowing = Fixed::new(Ok(GateDecision::Allow));
    let handlers = vec![
        limited("off", zero, false, false, &w.runs),
        limited("off_gated", zero, false, true, &w.runs),
        limited("off_confirmed", zero, true, false, &w.runs),
        limited("switched_by_admin", RateLimits::NONE, false, false, &w.runs),
        limited(
            "cooling_only",
            RateLimits {
                cooldown: Some(Duration::from_secs(60)),
                daily_limit: None,
            },
            false,
            false,
            &w.runs,
        ),
    ];
    let definitions = handlers.iter().map(|h| definition(h.name)).collect();
    let registry = Registry::build(definitions, handlers, Arc::new(w.ledger.clone()))
        .unwrap()
        .with_gate(allowing.clone());
    // An admin switches one tool off, as `PUT /v1/admin/settings` would.
    let settings = data_plane_registry::Settings::default()
        .apply(
            json!({ "tool_rate_limits": { "switched_by_admin": { "daily_limit": 0 } } })
                .as_object()
                .unwrap(),
        )
        .unwrap();
    let person = Arc::new(Person::default());
    person.answers(true);
    let ctx = w.asking(person.clone()).with_settings(Arc::new(settings));

    for tool in ["off", "off_gated", "off_confirmed", "switched_by_admin"] {
        // The user has never called it: the first call of the day is
        // refused as surely as the second.
        for _ in 0..2 {
            let refused = run(&registry, tool, &ctx).await;
            assert_code(
                &refused,
                ErrorCode::RateLimited,
                &format!("{tool} is switched off: its daily limit is 0"),
            );
        }
        assert_eq!(w.counted(tool).await, 0, "{tool}");
    }
    assert_eq!(w.runs(), 0, "no call of a tool limited to 0 ran");
    assert!(allowing.asked().is_empty(), "{:?}", allowing.asked());
    assert_eq!(
        person.asked(),
        0,
        "nobody is asked about a call that cannot run"
    );

    // A limit of time alone still lets the first call through.
    assert!(run(&registry, "cooling_only", &ctx).await.success);
    let cooling = run(&registry, "cooling_only", &ctx).await;
    assert_code(
        &cooling,
        ErrorCode::RateLimited,
        "ms before calling it again",
    );
    assert_eq!(w.runs(), 1);
}

/// A remote module's tool whose schema takes an unbounded array.
fn remote_bulk(runs: &Arc<Runs>) -> data_plane_registry::ToolEntry {
    data_plane_registry::ToolEntry::remote(data_plane_registry::RemoteTool {
        module: "crm".into(),
        name: "bulk_update".into(),
        description: "Updates many records at once.".into(),
        summary: "updates many records".into(),
        parameters: json!({
            "type": "object",
            "properties": { "ids": { "type": "array", "items": { "type": "string" } } },
            "required": ["ids"]
        }),
        permission: Permission::User,
        hints: AnnotationHints::DERIVED,
        timeout: Duration::from_secs(10),
        source: "module crm: handlers/tests/gate.rs".into(),
        handler: Arc::new(Counted(runs.clone())),
    })
    .unwrap()
}

#[tokio::test]
async fn a_call_too_large_for_the_gate_is_judged_on_a_bounded_copy_or_refused_never_run_unjudged() {
    let w = World::new().await;
    // A deny-by-default evaluation service with the body limit such
    // services have (1 MiB): a larger request is answered 413.
    let limit = 1024 * 1024;
    let (limited_server, limited_seen) = {
        let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
        let kept = seen.clone();
        let server = Server::start(move |request: Request| {
            let too_large = request.body.len() > limit;
            kept.lock().unwrap().push(request);
            if too_large {
                answer(413, r#"{"error": "payload too large"}"#)
            } else {
                answer(
                    200,
                    r#"{"decision": "deny", "reason": "not on the allow list"}"#,
                )
            }
        })
        .await;
        (server, seen)
    };
    let gate = HttpGate::new(&limited_server.url("/evaluate"), None).unwrap();
    let registry = w.registry(Some(Arc::new(gate)));
    registry.set_module_tools("crm", vec![remote_bulk(&w.runs)]);

    // 100,000 ids: about 1.4 MB of arguments.
    let ids: Vec<String> = (0..100_000).map(|i| format!("rec-{i:07}")).collect();
    let r = registry
        .execute_tool(
            "crm.bulk_update",
            json!({ "ids": ids }),
            &w.ctx("call-bulk"),
            &NoCallbacks,
        )
        .await;
    assert!(!r.success, "{r:?}");
    assert_eq!(r.code(), Some(ErrorCode::Blocked), "{r:?}");
    assert!(
        r.error
            .as_ref()
            .unwrap()
            .message
            .contains("not on the allow list"),
        "{r:?}"
    );
    assert_eq!(w.runs(), 0, "the call never ran");
    assert_eq!(w.audited_gate("call-bulk").await.as_deref(), Some("deny"));
    {
        let seen = limited_seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert!(seen[0].body.len() < limit, "{} bytes", seen[0].body.len());
        let posted: Value = serde_json::from_slice(&seen[0].body).unwrap();
        assert_eq!(posted["tool"], "crm.bulk_update");
        assert_eq!(posted["arguments"]["ids"].as_array().unwrap().len(), 256);
        assert_eq!(posted["arguments"]["ids"][0], "rec-0000000");
        assert_eq!(
            posted["arguments_cut"],
            json!([{ "path": "/ids", "unit": "items", "kept": 256, "total": 100_000 }])
        );
    }

    // Arguments that cannot be cut to fit (nested past the bound) are
    // refused without asking the service, and never run.
    let mut deep = json!("rec-1");
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let r = registry
        .execute_tool(
            "crm.bulk_update",
            json!({ "ids": ["rec-1"], "extra": deep }),
            &w.ctx("call-deep"),
            &NoCallbacks,
        )
        .await;
    assert_eq!(r.code(), Some(ErrorCode::Blocked), "{r:?}");
    assert!(
        r.error
            .as_ref()
            .unwrap()
            .message
            .contains("cannot be checked"),
        "{r:?}"
    );
    assert_eq!(
        limited_seen.lock().unwrap().len(),
        1,
        "the service was not asked"
    );
    assert_eq!(w.runs(), 0);
}

#[tokio::test]
async fn a_policy_rule_on_a_module_blocks_its_remote_tools() {
    let w = World::new().await;
    // As serve parses it: the gated tools, and `crm.*` for the configured module.
    let policy = PolicyGate::parse(
        "gate.json",
        r#"{"rules": [{"tools": ["crm.*"], "effect": "deny", "reason": "the CRM is read by people only"}]}"#,
        &["gated", "plain", "crm.*"],
    )
    .unwrap();
    let registry = w.registry(Some(Arc::new(policy)));
    registry.set_module_tools("crm", vec![remote_bulk(&w.runs)]);
    let r = registry
        .execute_tool(
            "crm__bulk_update",
            json!({ "ids": ["rec-1"] }),
            &w.ctx("call-crm"),
            &NoCallbacks,
        )
        .await;
    assert_refused(
        &r,
        ErrorCode::Blocked,
        "crm.bulk_update was blocked by the eval gate: the CRM is read by people only",
    );
    assert_eq!(w.runs(), 0);
    assert_eq!(w.audited_gate("call-crm").await.as_deref(), Some("deny"));
    // The module's other tools, and the built-in ones, are not touched.
    assert_ran(&w.call(&registry, "gated", "call-not-crm").await);
}
