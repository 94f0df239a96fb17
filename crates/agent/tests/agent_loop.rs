//! The model loop against the fake OpenAI-compatible endpoint and a real
//! registry whose tools are written for these tests: streaming text,
//! native calls assembled from fragments, concurrency of read-only calls,
//! the step limit, the one retry, every way the endpoint can fail, and
//! cancellation.

// Tests report failure by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use data_plane_agent::testing::{
    FakeModel, Piece, Reply, ScriptedCall, chunk, text_reply, tool_calls_reply, unused_base_url,
};
use data_plane_agent::{
    Agent, AgentConfig, AgentError, AgentEvent, ChatRequest, FinishReason, RunOutcome, SubAgentSink,
};
use data_plane_registry::{
    AnnotationHints, Callbacks, Category, ChannelCallbacks, CostTier, DefinitionFile, ErrorCode,
    HandlerEntry, NoLedger, Permission, RateLimits, Registry, ToolContext, ToolError, ToolEvent,
    ToolHandler, ToolMeta,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the test tools saw: (tool, key, start, end).
#[derive(Debug, Default)]
struct Journal {
    calls: Mutex<Vec<(String, String, Instant, Instant)>>,
    started: AtomicUsize,
    finished_slow: AtomicBool,
    flaky_failures: Mutex<Vec<String>>,
}

struct TestTool {
    name: &'static str,
    journal: Arc<Journal>,
}

#[async_trait]
impl ToolHandler for TestTool {
    async fn call(
        &self,
        args: Value,
        _ctx: &ToolContext,
        _callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        let key = args["key"].as_str().unwrap_or_default().to_string();
        self.journal.started.fetch_add(1, Ordering::SeqCst);
        let start = Instant::now();
        match self.name {
            "lookup" | "write_note" => tokio::time::sleep(Duration::from_millis(300)).await,
            "slow" => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                self.journal.finished_slow.store(true, Ordering::SeqCst);
            }
            // A limit's refusal, as a provider's 429 becomes one.
            "throttled" => {
                return Err(ToolError::new(
                    ErrorCode::RateLimited,
                    "the provider allows one search a second",
                ));
            }
            "flaky" | "flaky_web" => {
                let mut failed = self.journal.flaky_failures.lock().unwrap();
                if !failed.contains(&key) {
                    failed.push(key.clone());
                    return Err(ToolError::unavailable(format!(
                        "the backend for {key} is briefly unavailable"
                    )));
                }
            }
            _ => {}
        }
        self.journal.calls.lock().unwrap().push((
            self.name.into(),
            key.clone(),
            start,
            Instant::now(),
        ));
        Ok(json!({ "tool": self.name, "key": key, "value": format!("value of {key}") }))
    }
}

fn definition(name: &str) -> DefinitionFile {
    DefinitionFile {
        file: format!("{name}.json"),
        text: json!({
            "name": name,
            "description": format!("test tool {name}"),
            "parameters": {
                "type": "object",
                "properties": { "key": { "type": "string", "description": "what to look up" } },
                "required": ["key"],
                "additionalProperties": false
            }
        })
        .to_string(),
    }
}

fn registry(journal: &Arc<Journal>) -> Arc<Registry> {
    let tools = [
        "flaky",
        "flaky_web",
        "lookup",
        "slow",
        "throttled",
        "write_note",
    ];
    let handlers = tools
        .iter()
        .map(|&name| HandlerEntry {
            name,
            file: "tests/agent_loop.rs",
            meta: ToolMeta {
                category: Category::Search,
                short_description: "test tool",
                available_when: "always",
                aliases: &[],
                annotations: match name {
                    "write_note" => AnnotationHints {
                        read_only: Some(false),
                        destructive: Some(false),
                        ..AnnotationHints::DERIVED
                    },
                    // Open-world, so not idempotent by the rules.
                    "flaky_web" => AnnotationHints {
                        open_world: Some(true),
                        ..AnnotationHints::DERIVED
                    },
                    _ => AnnotationHints::DERIVED,
                },
                cost: CostTier::Cheap,
                permission: Permission::User,
                timeout: Duration::from_secs(10),
                limits: RateLimits::NONE,
                requires_gate: false,
                defer_loading: false,
                tag: None,
            },
            available: |_| true,
            shape: None,
            asks: None,
            handler: Arc::new(TestTool {
                name,
                journal: journal.clone(),
            }),
            args_schema: json!({}),
            output_schema: None,
        })
        .collect();
    let definitions = tools.iter().map(|n| definition(n)).collect();
    Arc::new(Registry::build(definitions, handlers, Arc::new(NoLedger)).unwrap())
}

fn ctx() -> ToolContext {
    ToolContext::new(uuid::Uuid::new_v4(), None, Permission::User)
}

fn request(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![serde_json::from_value(json!({"role": "user", "content": text})).unwrap()],
        ..Default::default()
    }
}

struct Setup {
    model: FakeModel,
    journal: Arc<Journal>,
    agent: Agent,
}

async fn setup(tune: impl FnOnce(&mut AgentConfig)) -> Setup {
    let model = FakeModel::start().await;
    let journal = Arc::new(Journal::default());
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.api_key = Some("sk-test".into());
    tune(&mut config);
    let agent = Agent::new(config, registry(&journal)).unwrap();
    Setup {
        model,
        journal,
        agent,
    }
}

/// Runs to the end, collecting every event.
async fn run(agent: &Agent, req: ChatRequest) -> (Result<RunOutcome, AgentError>, Vec<AgentEvent>) {
    run_in(agent, req, &ctx()).await
}

/// [`run`] under `ctx`.
async fn run_in(
    agent: &Agent,
    req: ChatRequest,
    ctx: &ToolContext,
) -> (Result<RunOutcome, AgentError>, Vec<AgentEvent>) {
    let (tx, mut rx) = mpsc::channel(8);
    let collect = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        events
    });
    let outcome = agent.run(req, ctx, &tx, &CancellationToken::new()).await;
    drop(tx);
    (outcome, collect.await.unwrap())
}

fn call<'a>(id: &'a str, name: &'a str, fragments: &'a [&'a str]) -> ScriptedCall<'a> {
    ScriptedCall {
        id,
        name,
        fragments,
    }
}

/// The `type` of each event, with the tool name where there is one.
fn kinds(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let v = serde_json::to_value(e).unwrap();
            let kind = v["type"].as_str().unwrap().to_string();
            match (v.get("name"), v.get("partial")) {
                (Some(n), Some(Value::Bool(true))) => format!("{kind}~{}", n.as_str().unwrap()),
                (Some(n), _) => format!("{kind}:{}", n.as_str().unwrap()),
                _ => kind,
            }
        })
        .collect()
}

#[tokio::test]
async fn plain_text_streams_as_text_deltas_and_sends_the_offered_tools() {
    let s = setup(|_| {}).await;
    s.model.push(text_reply(&["Hel", "lo, ", "world"]));
    let (outcome, events) = run(&s.agent, request("hi")).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.reason, FinishReason::Stop);
    assert_eq!(outcome.steps, 1);
    assert_eq!(outcome.text, "Hello, world");
    assert_eq!(outcome.usage.prompt_tokens, 20);
    // Each delta goes out as it arrives; the parser only holds trailing
    // whitespace until it knows no call markup follows it.
    assert_eq!(
        events,
        ["Hel", "lo,", " world"]
            .iter()
            .map(|t| AgentEvent::TextDelta {
                text: t.to_string()
            })
            .collect::<Vec<_>>()
    );
    let requests = s.model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(s.model.authorizations(), ["Bearer sk-test"]);
    let sent = &requests[0];
    assert_eq!(sent["model"], "test-model");
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
    assert_eq!(sent["messages"], json!([{"role": "user", "content": "hi"}]));
    let names: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["type"], "function");
            t["function"]["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        names,
        [
            "flaky",
            "flaky_web",
            "lookup",
            "slow",
            "throttled",
            "write_note"
        ]
    );
}

#[tokio::test]
async fn a_native_call_split_across_chunks_runs_and_its_result_goes_back() {
    let s = setup(|_| {}).await;
    s.model.push(tool_calls_reply(&[call(
        "call_Xy1",
        "lookup",
        &["{\"ke", "y\": \"al", "pha\"}"],
    )]));
    s.model.push(text_reply(&["It is alpha."]));
    let (outcome, events) = run(&s.agent, request("look up alpha")).await;
    assert_eq!(outcome.unwrap().steps, 2);
    assert_eq!(
        kinds(&events),
        [
            "tool_call~lookup",
            "tool_call~lookup",
            "tool_call~lookup",
            "tool_call:lookup",
            "tool_result:lookup",
            "text_delta"
        ]
    );
    let fragments: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallDelta {
                call_id,
                arguments_delta,
                ..
            } => {
                assert_eq!(call_id, "call_Xy1");
                Some(arguments_delta.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(fragments, "{\"key\": \"alpha\"}");
    assert!(
        matches!(&events[3], AgentEvent::Tool(ToolEvent::ToolCall { call_id, arguments, .. })
        if call_id == "call_Xy1" && *arguments == json!({"key": "alpha"}))
    );
    assert!(
        matches!(&events[4], AgentEvent::Tool(ToolEvent::ToolResult { result, .. })
        if result.success && result.call_id == "call_Xy1")
    );

    let second = &s.model.requests()[1];
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "tool_calls": [{
            "id": "call_Xy1", "type": "function",
            "function": {"name": "lookup", "arguments": "{\"key\": \"alpha\"}"}
        }]})
    );
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], "call_Xy1");
    let content: Value = serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        content,
        json!({
            "success": true,
            "notice": data_plane_agent::textcalls::UNTRUSTED_NOTICE,
            "data": {"tool": "lookup", "key": "alpha", "value": "value of alpha"}
        })
    );
}

/// Two calls of `tool` in one turn: whether they overlapped in time, and
/// the order their results went back in.
async fn two_calls(tool: &str) -> (bool, Vec<String>) {
    let s = setup(|_| {}).await;
    s.model.push(tool_calls_reply(&[
        call("call_a", tool, &["{\"key\":\"a\"}"]),
        call("call_b", tool, &["{\"key\":\"b\"}"]),
    ]));
    s.model.push(text_reply(&["done"]));
    let (outcome, _) = run(&s.agent, request("two")).await;
    outcome.unwrap();
    let calls = s.journal.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    let overlapped = calls[0].2 < calls[1].3 && calls[1].2 < calls[0].3;
    let order = s.model.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_string())
        .collect();
    (overlapped, order)
}

#[tokio::test]
async fn read_only_calls_run_together_and_others_one_at_a_time() {
    for (tool, concurrent) in [("lookup", true), ("write_note", false)] {
        let (overlapped, order) = two_calls(tool).await;
        assert_eq!(overlapped, concurrent, "{tool}");
        assert_eq!(order, ["call_a", "call_b"], "{tool}");
    }
}

/// An execute_tool call of `tool` with `key`, as the model writes it.
fn execute(key: &str, tool: &str) -> String {
    json!({ "name": tool, "arguments": { "key": key } }).to_string()
}

#[tokio::test]
async fn in_discovery_execute_tool_runs_the_tool_under_its_own_name_and_rules() {
    let mut discovery = ctx();
    discovery.tool_search = true;
    // Read-only tools run together and a retryable failure of an idempotent
    // one is retried, as when the model calls them by name; write_note runs
    // alone. (flaky answers at once: whether its calls overlapped says
    // nothing.)
    for (tool, concurrent, retried) in [
        ("lookup", Some(true), false),
        ("flaky", None, true),
        ("write_note", Some(false), false),
    ] {
        let s = setup(|_| {}).await;
        let (a, b) = (execute("a", tool), execute("b", tool));
        s.model.push(tool_calls_reply(&[
            call("call_a", "execute_tool", &[&a]),
            call("call_b", "execute_tool", &[&b]),
        ]));
        s.model.push(text_reply(&["done"]));
        let (outcome, events) = run_in(&s.agent, request("two"), &discovery).await;
        assert_eq!(outcome.unwrap().steps, 2, "{tool}");

        let requests = s.model.requests();
        let offered: Vec<&str> = requests[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(offered, ["search_tools", "describe_tool", "execute_tool"]);

        let calls = s.journal.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 2, "{tool}");
        let overlapped = calls[0].2 < calls[1].3 && calls[1].2 < calls[0].3;
        if let Some(concurrent) = concurrent {
            assert_eq!(overlapped, concurrent, "{tool}");
        }
        let runs = if retried { 4 } else { 2 };
        assert_eq!(s.journal.started.load(Ordering::SeqCst), runs, "{tool}");
        // The stream names the tool that ran, under the model's call ids:
        // one result a call, a retry inside it.
        let results: Vec<String> = kinds(&events)
            .into_iter()
            .filter(|k| k.starts_with("tool_result"))
            .collect();
        assert_eq!(results.len(), 2, "{tool}");
        assert!(
            results.iter().all(|k| *k == format!("tool_result:{tool}")),
            "{results:?}"
        );
        let answers: Vec<Value> = requests[1]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
            .collect();
        assert_eq!(answers.len(), 2);
        for (answer, key) in answers.iter().zip(["a", "b"]) {
            assert_eq!(answer["data"]["key"], key, "{tool}: {answer}");
            assert_eq!(answer["data"]["tool"], tool);
        }
    }
}

#[tokio::test]
async fn the_step_limit_stops_a_model_that_keeps_calling_tools() {
    let s = setup(|c| c.max_steps = 2).await;
    for id in ["call_1", "call_2", "call_3"] {
        s.model.push(tool_calls_reply(&[call(
            id,
            "lookup",
            &["{\"key\":\"x\"}"],
        )]));
    }
    let (outcome, events) = run(&s.agent, request("loop")).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.reason, FinishReason::StepLimit);
    assert_eq!(outcome.steps, 2);
    assert_eq!(s.model.requests().len(), 2);
    // The second turn's call was not run.
    assert_eq!(s.journal.started.load(Ordering::SeqCst), 1);
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| *k == "tool_result:lookup")
            .count(),
        1
    );
}

#[tokio::test]
async fn a_retryable_failure_is_retried_once_and_others_are_not() {
    let s = setup(|_| {}).await;
    s.model.push(tool_calls_reply(&[
        call("call_f", "flaky", &["{\"key\":\"k\"}"]),
        call("call_bad", "lookup", &["{\"nope\":1}"]),
        call("call_t", "throttled", &["{\"key\":\"k\"}"]),
    ]));
    s.model.push(text_reply(&["ok"]));
    let (outcome, events) = run(&s.agent, request("go")).await;
    outcome.unwrap();
    // One call is one id on the wire: one tool_call and one tool_result,
    // the retry told by the result's attempts.
    let of = |id: &str| -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Tool(ToolEvent::ToolCall { call_id, .. }) if call_id == id => {
                    Some("call".to_string())
                }
                AgentEvent::Tool(ToolEvent::ToolResult {
                    call_id, result, ..
                }) if call_id == id => Some(format!(
                    "result {} {:?} attempts={}",
                    result.success,
                    result.code(),
                    result.attempts
                )),
                _ => None,
            })
            .collect()
    };
    assert_eq!(of("call_f"), ["call", "result true None attempts=2"]);
    assert_eq!(
        of("call_bad"),
        ["call", "result false Some(InvalidArguments) attempts=1"]
    );
    // A limit's refusal is not retried: the same call would be refused again.
    assert_eq!(
        of("call_t"),
        ["call", "result false Some(RateLimited) attempts=1"]
    );
    let handled = s.journal.started.load(Ordering::SeqCst);
    assert_eq!(handled, 3, "flaky twice, throttled once, lookup never");
    let messages = s.model.requests()[1]["messages"].clone();
    let flaky: Value = serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(flaky["success"], true, "the model sees the retry's result");
}

#[tokio::test]
async fn only_idempotent_tools_are_retried() {
    let s = setup(|_| {}).await;
    let tools = registry(&s.journal);
    assert!(tools.get("flaky").unwrap().annotations.idempotent);
    assert!(!tools.get("flaky_web").unwrap().annotations.idempotent);
    s.model.push(tool_calls_reply(&[call(
        "call_w",
        "flaky_web",
        &["{\"key\":\"k\"}"],
    )]));
    s.model.push(text_reply(&["ok"]));
    let (outcome, events) = run(&s.agent, request("go")).await;
    outcome.unwrap();
    let results: Vec<(bool, Option<ErrorCode>)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Tool(ToolEvent::ToolResult { result, .. }) => {
                Some((result.success, result.code()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [(false, Some(ErrorCode::Unavailable))],
        "a retryable failure of a tool that is not idempotent goes to the model as it is"
    );
    let messages = s.model.requests()[1]["messages"].clone();
    let seen: Value = serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(seen["success"], false);
    assert_eq!(
        seen["error"]["retryable"], true,
        "the model may call it again"
    );
}

#[tokio::test]
async fn arguments_that_are_not_json_go_back_as_an_error_without_running() {
    let s = setup(|_| {}).await;
    s.model.push(tool_calls_reply(&[call(
        "call_j",
        "lookup",
        &["{\"key\": "],
    )]));
    s.model.push(text_reply(&["sorry"]));
    let (outcome, _) = run(&s.agent, request("go")).await;
    outcome.unwrap();
    assert_eq!(s.journal.started.load(Ordering::SeqCst), 0);
    let messages = s.model.requests()[1]["messages"].clone();
    let result: Value = serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["error"]["code"], "invalid_arguments");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{result}"
    );
}

/// How the endpoint misbehaves, and the error code the run must end with.
async fn check(case: &str, reply: Option<Reply>, expected: &str) {
    let s = setup(|c| {
        c.first_byte_timeout = Duration::from_millis(400);
        c.idle_timeout = Duration::from_millis(400);
    })
    .await;
    let agent = match reply {
        Some(reply) => {
            s.model.push(reply);
            s.agent
        }
        None => {
            let config = AgentConfig::new(unused_base_url().await, "m");
            Agent::new(config, registry(&s.journal)).unwrap()
        }
    };
    let started = Instant::now();
    let (outcome, _) = run(&agent, request("hi")).await;
    let error = outcome.expect_err(case);
    assert_eq!(error.code(), expected, "{case}: {error}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{case} took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_failing_endpoint_ends_the_run_with_a_clear_error() {
    let text = |t: &str| Piece::Chunk(chunk(json!({"content": t}), None));
    let cases: Vec<(&str, Option<Reply>, &str)> = vec![
        ("endpoint down", None, "model_unreachable"),
        (
            "500",
            Some(Reply::Status {
                status: 500,
                body: r#"{"error":{"message":"The server had an error","type":"server_error"}}"#.into(),
            }),
            "model_error",
        ),
        (
            "401",
            Some(Reply::Status {
                status: 401,
                body: r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#.into(),
            }),
            "model_error",
        ),
        (
            "garbage data",
            Some(Reply::Stream(vec![text("a"), Piece::Bytes("data: {not json\n\n".into())])),
            "model_bad_response",
        ),
        (
            "not a chunk",
            Some(Reply::Stream(vec![Piece::Chunk(json!({"hello": "world"}))])),
            "model_bad_response",
        ),
        (
            "html instead of a stream",
            Some(Reply::Raw(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 13\r\n\r\n<html></html>".to_vec(),
            )),
            "model_bad_response",
        ),
        (
            "not http at all",
            Some(Reply::Raw(b"\x00\x01garbage\r\n\r\n".to_vec())),
            "model_unreachable",
        ),
        (
            "cut off before finishing",
            Some(Reply::Stream(vec![text("a")])),
            "model_bad_response",
        ),
        (
            "error mid-stream",
            Some(Reply::Stream(vec![
                text("a"),
                Piece::Chunk(json!({"error": {"message": "overloaded", "type": "server_error"}})),
            ])),
            "model_error",
        ),
        ("silent before the first byte", Some(Reply::Stream(vec![Piece::Hang])), "model_timeout"),
        ("silent mid-answer", Some(Reply::Stream(vec![text("a"), Piece::Hang])), "model_timeout"),
    ];
    for (case, reply, expected) in cases {
        check(case, reply, expected).await;
    }
}

#[tokio::test]
async fn a_stalled_endpoint_sees_its_connection_closed_after_the_timeout() {
    let s = setup(|c| c.idle_timeout = Duration::from_millis(300)).await;
    s.model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(json!({"content": "a"}), None)),
        Piece::Hang,
    ]));
    let (outcome, _) = run(&s.agent, request("hi")).await;
    assert_eq!(outcome.unwrap_err().code(), "model_timeout");
    assert!(s.model.wait_dropped(1, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn cancelling_stops_the_model_request() {
    let s = setup(|_| {}).await;
    s.model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(json!({"content": "thinking"}), None)),
        Piece::Hang,
    ]));
    let cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel(8);
    let trigger = cancel.clone();
    tokio::spawn(async move {
        // Cancel once the answer has begun.
        rx.recv().await;
        trigger.cancel();
        while rx.recv().await.is_some() {}
    });
    let outcome = s.agent.run(request("hi"), &ctx(), &tx, &cancel).await;
    assert!(matches!(outcome, Err(AgentError::Cancelled)));
    assert!(s.model.wait_dropped(1, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn cancelling_stops_running_tools_and_asks_the_model_nothing_more() {
    let s = setup(|_| {}).await;
    s.model.push(tool_calls_reply(&[call(
        "call_s",
        "slow",
        &["{\"key\":\"z\"}"],
    )]));
    s.model.push(text_reply(&["never asked"]));
    let cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel(8);
    let trigger = cancel.clone();
    tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            if matches!(event, AgentEvent::Tool(ToolEvent::ToolCall { .. })) {
                trigger.cancel();
            }
        }
    });
    let started = Instant::now();
    let outcome = s.agent.run(request("hi"), &ctx(), &tx, &cancel).await;
    assert!(matches!(outcome, Err(AgentError::Cancelled)));
    assert!(started.elapsed() < Duration::from_secs(2));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(s.journal.started.load(Ordering::SeqCst), 1);
    assert!(
        !s.journal.finished_slow.load(Ordering::SeqCst),
        "the tool ran on"
    );
    assert_eq!(s.model.requests().len(), 1);
}

#[tokio::test]
async fn a_reader_that_goes_away_stops_the_run() {
    let s = setup(|_| {}).await;
    s.model.push(text_reply(&["a", "b"]));
    let (tx, rx) = mpsc::channel(8);
    drop(rx);
    let outcome = s
        .agent
        .run(request("hi"), &ctx(), &tx, &CancellationToken::new())
        .await;
    assert!(matches!(outcome, Err(AgentError::Cancelled)));
}

#[tokio::test]
async fn a_nested_agent_sees_its_allow_list_and_reports_through_the_parent() {
    let s = setup(|_| {}).await;
    s.model.push(tool_calls_reply(&[call(
        "call_n",
        "lookup",
        &["{\"key\":\"q\"}"],
    )]));
    s.model.push(text_reply(&["summary"]));
    let mut nested = ctx();
    nested.allow_list = Some(Arc::from(vec!["lookup".to_string()]));
    nested.parent_call_id = Some("call_parent".into());
    let (parent, mut events) = ChannelCallbacks::new();
    let sink = SubAgentSink::new(&parent, "call_parent");
    let outcome = s
        .agent
        .run(
            request("analyse"),
            &nested,
            &sink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.text, "summary");
    let tools = s.model.requests()[0]["tools"].clone();
    assert_eq!(tools.as_array().unwrap().len(), 1);
    assert_eq!(tools[0]["function"]["name"], "lookup");
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push(e);
    }
    assert!(
        matches!(&seen[0], ToolEvent::SubagentToolCall { parent_call_id, call_id, .. }
        if parent_call_id == "call_parent" && call_id == "call_n")
    );
    assert!(matches!(&seen[1], ToolEvent::SubagentToolResult { result, .. } if result.success));
    assert_eq!(
        seen[2],
        ToolEvent::SubagentChunk {
            parent_call_id: "call_parent".into(),
            text: "summary".into()
        }
    );
}

#[tokio::test]
async fn a_call_written_as_text_runs_like_a_native_one() {
    let s = setup(|_| {}).await;
    s.model.push(text_reply(&[
        "<think>the user wants the key be",
        "ta</think>Let me check. <tool_call>{\"name\": \"lookup\", ",
        "\"arguments\": {\"key\": \"beta\"}}</tool_call>",
    ]));
    s.model.push(text_reply(&["Beta it is."]));
    let (outcome, events) = run(&s.agent, request("beta?")).await;
    outcome.unwrap();
    let shown: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !shown.contains("tool_call"),
        "markup reached the user: {shown}"
    );
    assert!(
        !shown.contains("think") && !shown.contains("user wants"),
        "reasoning reached the user: {shown}"
    );
    assert!(shown.starts_with("Let me check."), "{shown}");
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| k.starts_with("tool_"))
            .collect::<Vec<_>>(),
        ["tool_call:lookup", "tool_result:lookup"]
    );
    let messages = s.model.requests()[1]["messages"].clone();
    let id = messages[1]["tool_calls"][0]["id"].as_str().unwrap();
    assert_eq!(messages[1]["tool_calls"][0]["function"]["name"], "lookup");
    assert_eq!(messages[2]["tool_call_id"], id);
}

// Bounds of one turn: output tokens, the deadline, a looping reply, an
// empty reply; and the system prompt.

fn with_system(system: &str, user: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![
            serde_json::from_value(json!({"role": "system", "content": system})).unwrap(),
            serde_json::from_value(json!({"role": "user", "content": user})).unwrap(),
        ],
        ..Default::default()
    }
}

#[tokio::test]
async fn every_model_request_carries_an_output_limit_a_request_can_only_lower() {
    let s = setup(|_| {}).await;
    for _ in 0..3 {
        s.model.push(text_reply(&["ok"]));
    }
    run(&s.agent, request("hi")).await.0.unwrap();
    let mut lower = request("hi");
    lower.max_tokens = Some(100);
    run(&s.agent, lower).await.0.unwrap();
    let mut higher = request("hi");
    higher.max_tokens = Some(1_000_000);
    run(&s.agent, higher).await.0.unwrap();
    let sent: Vec<Value> = s
        .model
        .requests()
        .iter()
        .map(|r| r["max_completion_tokens"].clone())
        .collect();
    assert_eq!(sent, [json!(4096), json!(100), json!(4096)]);
    assert!(
        s.model
            .requests()
            .iter()
            .all(|r| r.get("max_tokens").is_none())
    );

    let old = setup(|c| c.max_tokens_field = data_plane_agent::MaxTokensField::MaxTokens).await;
    old.model.push(text_reply(&["ok"]));
    run(&old.agent, request("hi")).await.0.unwrap();
    let sent = &old.model.requests()[0];
    assert_eq!(sent["max_tokens"], 4096);
    assert!(sent.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn a_model_that_keeps_talking_is_stopped_at_the_deadline_with_what_it_said() {
    let s = setup(|c| c.turn_deadline = Some(Duration::from_secs(30))).await;
    let mut pieces = vec![Piece::Chunk(chunk(json!({"content": "Let me see"}), None))];
    for i in 0..400 {
        pieces.push(Piece::Pause(Duration::from_millis(5)));
        pieces.push(Piece::Chunk(chunk(
            json!({"content": format!(" {i}")}),
            None,
        )));
    }
    pieces.push(Piece::Hang);
    s.model.push(Reply::Stream(pieces));
    let mut req = request("hi");
    req.deadline = Some(Duration::from_millis(700));
    let started = Instant::now();
    let (outcome, events) = run(&s.agent, req).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.reason, FinishReason::Deadline);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(outcome.steps, 1);
    assert!(
        outcome.text.starts_with("Let me see 0 1"),
        "{}",
        outcome.text
    );
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(outcome.text.starts_with(streamed.trim_end()));
    assert!(s.model.wait_dropped(1, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn the_deadline_also_stops_a_tool_that_runs_too_long() {
    let s = setup(|c| c.turn_deadline = Some(Duration::from_millis(800))).await;
    s.model.push(tool_calls_reply(&[call(
        "call_s",
        "slow",
        &["{\"key\": \"k\"}"],
    )]));
    let started = Instant::now();
    let (outcome, events) = run(&s.agent, request("hi")).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.reason, FinishReason::Deadline);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(kinds(&events).contains(&"tool_call:slow".to_string()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!s.journal.finished_slow.load(Ordering::SeqCst));
    assert_eq!(s.model.requests().len(), 1);
}

#[tokio::test]
async fn a_reply_that_repeats_itself_is_cut_and_its_connection_closed() {
    let s = setup(|_| {}).await;
    let mut pieces = vec![Piece::Chunk(chunk(json!({"content": "Sure."}), None))];
    for _ in 0..300 {
        pieces.push(Piece::Chunk(chunk(
            json!({"content": " I will look in the documents for you."}),
            None,
        )));
    }
    // A looping model never stops by itself.
    pieces.push(Piece::Hang);
    s.model.push(Reply::Stream(pieces));
    let started = Instant::now();
    let (outcome, _) = run(&s.agent, request("hi")).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.reason, FinishReason::Repetition);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(outcome.text.len() < 1_500, "{} bytes", outcome.text.len());
    assert!(s.model.wait_dropped(1, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn an_empty_reply_is_asked_again_once_then_reported() {
    let s = setup(|_| {}).await;
    s.model.push(text_reply(&[]));
    s.model.push(text_reply(&["Here it is."]));
    let (outcome, _) = run(&s.agent, request("hi")).await;
    let outcome = outcome.unwrap();
    assert_eq!((outcome.reason, outcome.steps), (FinishReason::Stop, 2));
    assert_eq!(outcome.text, "Here it is.");

    s.model.push(text_reply(&["  \n"]));
    s.model.push(text_reply(&[]));
    let (outcome, _) = run(&s.agent, request("hi")).await;
    let outcome = outcome.unwrap();
    assert_eq!((outcome.reason, outcome.steps), (FinishReason::Empty, 2));
    assert_eq!(s.model.requests().len(), 4);
}

#[tokio::test]
async fn the_system_prompt_goes_first_and_the_requests_own_follows() {
    let s = setup(|c| {
        c.system_prompt = Some(data_plane_agent::prompt::PromptTemplate::default());
    })
    .await;
    s.model.push(text_reply(&["ok"]));
    let mut req = with_system("Answer in haiku.", "hi");
    req.facts = Some(data_plane_agent::prompt::PromptFacts {
        space: Some(data_plane_agent::prompt::SpaceFacts {
            name: "Lab notes".into(),
            description: "Experiments of 2026".into(),
        }),
        today: chrono_date(2026, 11, 25),
    });
    run(&s.agent, req).await.0.unwrap();
    let sent = &s.model.requests()[0]["messages"];
    let roles: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "system", "user"]);
    let ours = sent[0]["content"].as_str().unwrap();
    assert!(ours.contains("data, not instructions"), "{ours}");
    assert!(ours.contains("- lookup: test tool"), "{ours}");
    assert!(ours.contains("- write_note: test tool"), "{ours}");
    assert!(ours.contains("the space \"Lab notes\": Experiments of 2026"));
    assert!(
        ours.ends_with("Today's date is Wednesday, 2026-11-25.\n"),
        "{ours}"
    );
    assert_eq!(sent[1]["content"], "Answer in haiku.");

    // Without a system prompt configured the conversation goes as it is.
    let plain = setup(|_| {}).await;
    plain.model.push(text_reply(&["ok"]));
    run(&plain.agent, with_system("Answer in haiku.", "hi"))
        .await
        .0
        .unwrap();
    assert_eq!(
        plain.model.requests()[0]["messages"][0]["content"],
        "Answer in haiku."
    );
}

fn chrono_date(y: i32, m: u32, d: u32) -> chrono::NaiveDate {
    chrono::NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

#[tokio::test]
async fn a_call_that_cannot_be_read_goes_back_to_the_model_as_a_retryable_error() {
    let s = setup(|_| {}).await;
    s.model.push(text_reply(&[
        "Checking. <tool_call>{\"name\": \"lookup\", \"arguments\": {\"key\": </tool_call>",
    ]));
    s.model.push(text_reply(&["Sorry."]));
    let (outcome, _) = run(&s.agent, request("beta?")).await;
    outcome.unwrap();
    let messages = s.model.requests()[1]["messages"].clone();
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["name"],
        "unreadable_tool_call"
    );
    let id = messages[1]["tool_calls"][0]["id"].as_str().unwrap();
    assert_eq!(messages[2]["tool_call_id"], id);
    let content = messages[2]["content"].as_str().unwrap();
    let message = serde_json::from_str::<Value>(content).unwrap()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("your tool call could not be read: ")
            && message.contains("<tool_call>")
            && message.ends_with(
                "; write it again with a valid tool name and a JSON object of arguments"
            ),
        "{message}"
    );
    // Word for word what the model read before: its own markup quoted back
    // as it wrote it, and a retry invited.
    let expected = json!({
        "success": false,
        "error": {
            "code": "invalid_arguments",
            "message": message,
            "retryable": true,
        }
    });
    assert_eq!(content, expected.to_string());
}

/// Some models number their calls afresh each step: a call id the run
/// used already is made unique, in the events and in the conversation the
/// model reads back, so a call stays one call everywhere.
#[tokio::test]
async fn a_call_id_the_model_reuses_in_a_later_step_is_made_unique() {
    let s = setup(|_| {}).await;
    s.model.push(tool_calls_reply(&[call(
        "call_0",
        "lookup",
        &["{\"key\":\"a\"}"],
    )]));
    s.model.push(tool_calls_reply(&[call(
        "call_0",
        "lookup",
        &["{\"key\":\"b\"}"],
    )]));
    s.model.push(text_reply(&["done"]));
    let (outcome, events) = run(&s.agent, request("twice")).await;
    assert_eq!(outcome.unwrap().reason, FinishReason::Stop);
    let ids: Vec<String> = events
        .iter()
        .filter_map(|e| {
            let v = serde_json::to_value(e).unwrap();
            (v["type"] == "tool_result").then(|| v["call_id"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(ids, ["call_0", "call_0_2"]);
    let last = s.model.requests()[2]["messages"].clone();
    let sent: Vec<&str> = last
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(sent, ["call_0", "call_0_2"]);
    assert_eq!(last[3]["tool_calls"][0]["id"], "call_0_2", "{last:#}");
}
