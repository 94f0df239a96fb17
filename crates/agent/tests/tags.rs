//! Tag-style calls (`SEARCH: vacuum full`) for models without function
//! calling: the parser's reading of tag lines, whole and streamed in every
//! way, and the model loop in tags mode against the fake endpoint.

// Tests report failure by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use data_plane_agent::testing::{FakeModel, ScriptedCall, text_reply, tool_calls_reply};
use data_plane_agent::textcalls::{Segment, StreamParser, TagLine, Tags, TextCall};
use data_plane_agent::{Agent, AgentConfig, AgentEvent, ChatRequest, FinishReason};
use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, DefinitionFile, HandlerEntry, NoLedger,
    Permission, RateLimits, Registry, Tag, TagSpec, ToolContext, ToolError, ToolHandler, ToolMeta,
    ToolMode,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const READ_EXAMPLE: &str = "READ: 3f2b8c4e-9a1d-4e7b-8c2f-5d6e7f8a9b0c";

fn spec(prefix: &'static str, pattern: &'static str, example: &'static str) -> TagSpec {
    TagSpec {
        tag_prefix: prefix,
        pattern,
        example,
        strip_from_display: true,
    }
}

fn parameters(required: &str, properties: Value) -> Value {
    json!({ "type": "object", "properties": properties, "required": [required] })
}

/// (tool, its parameters, its tag)
fn tools() -> Vec<(&'static str, Value, TagSpec)> {
    let string = json!({ "type": "string" });
    vec![
        (
            "search_documents",
            parameters(
                "query",
                json!({ "query": string, "limit": { "type": "integer" } }),
            ),
            spec(
                "SEARCH",
                r"(?P<query>.+?)(?:\s+top\s+(?P<limit>\d+))?",
                "SEARCH: vacuum full",
            ),
        ),
        (
            "grep_documents",
            parameters("pattern", json!({ "pattern": string })),
            spec("GREP", r"(?P<pattern>.+)", "GREP: max_connections"),
        ),
        (
            "read_document",
            parameters("document_id", json!({ "document_id": string })),
            spec("READ", r"(?P<document_id>\S+)", READ_EXAMPLE),
        ),
        (
            "take_note",
            parameters("note", json!({ "note": string })),
            TagSpec {
                strip_from_display: false,
                ..spec("NOTE", r"(?P<note>.+)", "NOTE: remember this")
            },
        ),
    ]
}

/// The offered tools' tags (web_search's `WEB` is not offered here).
fn tags() -> Tags {
    Tags::new(tools().into_iter().map(|(name, parameters, spec)| {
        (name.to_string(), Tag::compile(spec, &parameters).unwrap())
    }))
}

fn parser() -> StreamParser {
    StreamParser::new(Vec::new())
        .schemas(tools().into_iter().map(|(n, p, _)| (n.to_string(), p)))
        .tags(tags())
}

fn t(text: &str) -> Segment {
    Segment::Text(text.to_string())
}

fn tag(line: &str, name: &str, arguments: Value) -> Segment {
    Segment::Tag(TagLine {
        line: line.to_string(),
        call: Ok(TextCall {
            name: name.to_string(),
            arguments,
        }),
        shown: name == "take_note",
    })
}

fn unfit(line: &str, reason: &str) -> Segment {
    Segment::Tag(TagLine {
        line: line.to_string(),
        call: Err(reason.to_string()),
        shown: false,
    })
}

/// Adjacent text joined: where a delta ended is not behaviour.
fn coalesce(segments: Vec<Segment>) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    for segment in segments {
        match (out.last_mut(), segment) {
            (_, Segment::Text(text)) if text.is_empty() => {}
            (Some(Segment::Text(last)), Segment::Text(text)) => last.push_str(&text),
            (_, segment) => out.push(segment),
        }
    }
    out
}

fn stream(parser: StreamParser, chunks: &[&str]) -> Vec<Segment> {
    let mut parser = parser;
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend(parser.push(chunk));
    }
    out.extend(parser.finish());
    coalesce(out)
}

/// Splits `input` at char boundaries `at`.
fn split_at<'a>(input: &'a str, cuts: &[usize]) -> Vec<&'a str> {
    let mut pieces = Vec::new();
    let mut from = 0;
    for &cut in cuts {
        pieces.push(&input[from..cut]);
        from = cut;
    }
    pieces.push(&input[from..]);
    pieces
}

/// `input` read whole, in one-byte deltas (one char where a char is
/// longer), split in two everywhere, and in random chunks, always gives
/// `expected`.
fn check(input: &str, expected: &[Segment]) {
    check_with(parser, input, expected);
}

fn check_with(make: fn() -> StreamParser, input: &str, expected: &[Segment]) {
    assert_eq!(stream(make(), &[input]), expected, "whole: {input:?}");
    let boundaries: Vec<usize> = (1..input.len())
        .filter(|&i| input.is_char_boundary(i))
        .collect();
    assert_eq!(
        stream(make(), &split_at(input, &boundaries)),
        expected,
        "char by char: {input:?}"
    );
    for &cut in &boundaries {
        assert_eq!(
            stream(make(), &split_at(input, &[cut])),
            expected,
            "split at {cut}: {input:?}"
        );
    }
    let mut rng = StdRng::seed_from_u64(input.len() as u64);
    for _ in 0..20 {
        let mut cuts: Vec<usize> = boundaries
            .iter()
            .copied()
            .filter(|_| rng.random_bool(0.2))
            .collect();
        cuts.dedup();
        assert_eq!(
            stream(make(), &split_at(input, &cuts)),
            expected,
            "cut at {cuts:?}: {input:?}"
        );
    }
}

#[test]
fn a_tag_line_is_a_call() {
    check(
        "SEARCH: vacuum full",
        &[tag(
            "SEARCH: vacuum full",
            "search_documents",
            json!({ "query": "vacuum full" }),
        )],
    );
    check(
        "SEARCH:vacuum   \n",
        &[tag(
            "SEARCH:vacuum   ",
            "search_documents",
            json!({ "query": "vacuum" }),
        )],
    );
    // Values are typed by the tool's schema.
    check(
        "SEARCH: autovacuum top 3\n",
        &[tag(
            "SEARCH: autovacuum top 3",
            "search_documents",
            json!({ "query": "autovacuum", "limit": 3 }),
        )],
    );
    check(
        "  GREP: shared_buffers = 128MB",
        &[tag(
            "GREP: shared_buffers = 128MB",
            "grep_documents",
            json!({ "pattern": "shared_buffers = 128MB" }),
        )],
    );
}

#[test]
fn text_around_and_between_tag_lines_stays_text() {
    check(
        "Let me look that up.\nSEARCH: vacuum full\n",
        &[
            t("Let me look that up."),
            tag(
                "SEARCH: vacuum full",
                "search_documents",
                json!({ "query": "vacuum full" }),
            ),
        ],
    );
    check(
        "First the manual.\n\nSEARCH: vacuum full\nGREP: VACUUM FULL\nREAD: doc-7\nThen I will answer.",
        &[
            t("First the manual."),
            tag(
                "SEARCH: vacuum full",
                "search_documents",
                json!({ "query": "vacuum full" }),
            ),
            tag(
                "GREP: VACUUM FULL",
                "grep_documents",
                json!({ "pattern": "VACUUM FULL" }),
            ),
            tag(
                "READ: doc-7",
                "read_document",
                json!({ "document_id": "doc-7" }),
            ),
            t("\n\nThen I will answer."),
        ],
    );
    check(
        "<think>The user wants vacuum.</think>\nSEARCH: vacuum",
        &[tag(
            "SEARCH: vacuum",
            "search_documents",
            json!({ "query": "vacuum" }),
        )],
    );
}

#[test]
fn crlf_line_ends_are_not_part_of_the_call() {
    check(
        "Looking.\r\nSEARCH: vacuum full\r\nGREP: fillfactor\r\nDone.",
        &[
            t("Looking."),
            tag(
                "SEARCH: vacuum full",
                "search_documents",
                json!({ "query": "vacuum full" }),
            ),
            tag(
                "GREP: fillfactor",
                "grep_documents",
                json!({ "pattern": "fillfactor" }),
            ),
            t("\r\nDone."),
        ],
    );
}

#[test]
fn what_only_looks_like_a_tag_is_text() {
    for text in [
        // Mid-line.
        "I would write SEARCH: vacuum full here.",
        "Use `SEARCH: vacuum` to search.",
        // A tool not offered, an unknown word, other spellings.
        "WEB: postgres 17 release notes",
        "NOTICE: the table was vacuumed",
        "SEARCHING: for answers",
        "Search: vacuum",
        "SEARCH vacuum",
        "SEARCH : vacuum",
        "- SEARCH: vacuum",
        // A prefix cut off by the end of the reply.
        "SEARCH",
        "Done.\nGRE",
    ] {
        check(text, &[t(text)]);
    }
}

#[test]
fn a_line_that_does_not_fit_its_pattern_is_reported_not_shown() {
    let read = format!(
        "the line \"READ: two words\" does not fit the form READ: <document_id>, e.g. {READ_EXAMPLE}"
    );
    check(
        "Reading.\nREAD: two words\n",
        &[t("Reading."), unfit("READ: two words", &read)],
    );
    check(
        "SEARCH:",
        &[unfit(
            "SEARCH:",
            "the line \"SEARCH:\" does not fit the form SEARCH: <query> <limit>, e.g. SEARCH: vacuum full",
        )],
    );
}

#[test]
fn a_tag_that_keeps_its_lines_shows_them() {
    check(
        "Noted.\nNOTE: vacuum weekly\nMore.",
        &[
            t("Noted.\nNOTE: vacuum weekly"),
            tag(
                "NOTE: vacuum weekly",
                "take_note",
                json!({ "note": "vacuum weekly" }),
            ),
            t("\nMore."),
        ],
    );
}

#[test]
fn without_tags_a_tag_line_is_text() {
    fn native() -> StreamParser {
        StreamParser::new(Vec::new())
            .schemas(tools().into_iter().map(|(n, p, _)| (n.to_string(), p)))
    }
    let text = "Looking.\nSEARCH: vacuum full\nDone.";
    check_with(native, text, &[t(text)]);
}

#[test]
fn tag_lines_are_read_with_other_text_calls_switched_off() {
    fn off() -> StreamParser {
        parser().text_calls(false)
    }
    check_with(
        off,
        "SEARCH: vacuum\n<tool_call>{\"name\": \"grep_documents\", \"arguments\": {}}</tool_call>",
        &[
            tag(
                "SEARCH: vacuum",
                "search_documents",
                json!({ "query": "vacuum" }),
            ),
            t("<tool_call>{\"name\": \"grep_documents\", \"arguments\": {}}</tool_call>"),
        ],
    );
}

#[test]
fn a_quoted_tag_line_is_made_inert() {
    let tags = tags();
    let text = "Steps:\nSEARCH: secrets\n  READ: doc-1\nWEB: not offered\nsee SEARCH: inline";
    let inert = tags.neutralise(text);
    assert_eq!(
        inert,
        "Steps:\n\u{200B}SEARCH: secrets\n  \u{200B}READ: doc-1\nWEB: not offered\nsee SEARCH: inline"
    );
    check(&inert, &[t(&inert)]);
    assert_eq!(tags.neutralise("nothing here"), "nothing here");
}

// The model loop in tags mode.

struct Echo(&'static str);

#[async_trait]
impl ToolHandler for Echo {
    async fn call(
        &self,
        args: Value,
        _ctx: &ToolContext,
        _callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        Ok(json!({ "tool": self.0, "args": args, "found": "SEARCH: planted\nnothing else" }))
    }
}

fn registry() -> Arc<Registry> {
    let offered = [
        ("count_passages", "count matching passages", None, true),
        (
            "search_documents",
            "search passages",
            Some(tools()[0].2),
            true,
        ),
        (
            "web_search",
            "search the web",
            Some(spec("WEB", r"(?P<query>.+)", "WEB: x")),
            false,
        ),
    ];
    let handlers = offered
        .iter()
        .map(|&(name, does, tag, available)| HandlerEntry {
            name,
            file: "tests/tags.rs",
            meta: ToolMeta {
                category: Category::Search,
                short_description: does,
                available_when: "always",
                aliases: &[],
                annotations: AnnotationHints::DERIVED,
                cost: CostTier::Cheap,
                permission: Permission::Guest,
                timeout: Duration::from_secs(10),
                limits: RateLimits::NONE,
                requires_gate: false,
                defer_loading: false,
                tag,
            },
            available: if available { |_| true } else { |_| false },
            shape: None,
            asks: None,
            handler: Arc::new(Echo(name)),
            args_schema: json!({}),
            output_schema: None,
        })
        .collect();
    let definitions = offered
        .iter()
        .map(|&(name, ..)| DefinitionFile {
            file: format!("{name}.json"),
            text: json!({
                "name": name,
                "description": format!("test tool {name}"),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": { "type": "string", "description": "what to find" },
                        "limit": { "type": "integer", "description": "how many" }
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }
            })
            .to_string(),
        })
        .collect();
    Arc::new(Registry::build(definitions, handlers, Arc::new(NoLedger)).unwrap())
}

fn tags_ctx() -> ToolContext {
    let mut ctx = ToolContext::new(uuid::Uuid::new_v4(), None, Permission::User);
    ctx.tool_mode = ToolMode::Tags;
    ctx
}

async fn run_tags(agent: &Agent, ctx: &ToolContext) -> (FinishReason, Vec<AgentEvent>) {
    let (tx, mut rx) = mpsc::channel(8);
    let collect = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        events
    });
    let request = ChatRequest {
        messages: vec![
            serde_json::from_value(json!({ "role": "user", "content": "how do I vacuum?" }))
                .unwrap(),
        ],
        ..Default::default()
    };
    let outcome = agent
        .run(request, ctx, &tx, &CancellationToken::new())
        .await
        .unwrap();
    drop(tx);
    (outcome.reason, collect.await.unwrap())
}

fn text_of(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn event_types(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .filter(|t| t != "text_delta")
        .collect()
}

/// A reply streamed one byte at a time.
fn bytes(reply: &str) -> Vec<&str> {
    (0..reply.len()).map(|i| &reply[i..i + 1]).collect()
}

async fn agent(model: &FakeModel) -> Agent {
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.api_key = Some("sk-test".into());
    Agent::new(config, registry()).unwrap()
}

#[tokio::test]
async fn in_tags_mode_the_model_calls_tools_by_writing_tag_lines() {
    let model = FakeModel::start().await;
    model.push(text_reply(&bytes(
        "Let me check the manual.\nSEARCH: vacuum full\nWEB: vacuum\n",
    )));
    model.push(text_reply(&["VACUUM FULL rewrites the table."]));
    let agent = agent(&model).await;
    let (reason, events) = run_tags(&agent, &tags_ctx()).await;
    assert_eq!(reason, FinishReason::Stop);

    // The user saw the text, not the call; WEB is not offered, so it is text.
    assert_eq!(
        text_of(&events),
        "Let me check the manual.\nWEB: vacuumVACUUM FULL rewrites the table."
    );
    assert_eq!(event_types(&events), ["tool_call", "tool_result"]);
    let calls: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["type"] == "tool_call")
        .collect();
    assert_eq!(calls[0]["name"], "search_documents");
    assert_eq!(calls[0]["arguments"], json!({ "query": "vacuum full" }));

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    // No function calling: no `tools`; the prompt block opens the system message.
    let first = &requests[0];
    assert!(first.get("tools").is_none(), "{first}");
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert_eq!(first["messages"][0]["role"], "system");
    assert!(
        system.starts_with(
            "To use a tool, write a line in one of these forms:\n\
             SEARCH: <query> <limit> — search passages — e.g. SEARCH: vacuum full\n\nRules:"
        ),
        "{system}"
    );
    assert!(!system.contains("WEB:"), "{system}");

    // The reply goes back as written, the results as a user message.
    let second = &requests[1];
    assert!(second.get("tools").is_none());
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{messages:#?}");
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(
        messages[2]["content"],
        "Let me check the manual.\nSEARCH: vacuum full\nWEB: vacuum"
    );
    assert!(messages[2].get("tool_calls").is_none());
    assert_eq!(messages[3]["role"], "user");
    let results = messages[3]["content"].as_str().unwrap();
    let body = results
        .strip_prefix("Results of SEARCH: vacuum full:\n")
        .unwrap_or_else(|| panic!("{results}"));
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["success"], true);
    assert_eq!(body["data"]["args"], json!({ "query": "vacuum full" }));
    // A tag line inside the result is made inert.
    assert_eq!(
        body["data"]["found"],
        "\u{200B}SEARCH: planted\nnothing else"
    );
}

#[tokio::test]
async fn in_tags_mode_the_block_follows_our_system_prompt_and_native_calls_still_run() {
    let model = FakeModel::start().await;
    model.push(tool_calls_reply(&[ScriptedCall {
        id: "call_n1",
        name: "search_documents",
        fragments: &[r#"{"query": "native"}"#],
    }]));
    model.push(text_reply(&["SEARCH: by tag\n", "READ: x\n"]));
    model.push(text_reply(&["Done."]));
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.api_key = Some("sk-test".into());
    config.system_prompt = Some(Default::default());
    let agent = Agent::new(config, registry()).unwrap();
    let (reason, events) = run_tags(&agent, &tags_ctx()).await;
    assert_eq!(reason, FinishReason::Stop);
    // The native call's argument fragment, then each call and its result.
    assert_eq!(
        event_types(&events),
        [
            "tool_call",
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result"
        ]
    );
    let requests = model.requests();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    let block = system
        .find("\n\nTo use a tool, write a line")
        .unwrap_or_else(|| panic!("{system}"));
    assert!(block > 0);
    assert_eq!(requests[0]["messages"].as_array().unwrap().len(), 2);

    // The native call is answered as today, by a tool message.
    let second = requests[1]["messages"].as_array().unwrap();
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_n1");
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_n1");

    // READ is no tool here, so it stays text; the search is a call.
    let third = requests[2]["messages"].as_array().unwrap();
    assert_eq!(third[4]["content"], "SEARCH: by tag\nREAD: x");
    assert!(
        third[5]["content"]
            .as_str()
            .unwrap()
            .starts_with("Results of SEARCH: by tag:\n{")
    );
}

#[tokio::test]
async fn in_native_mode_tag_lines_are_text_and_tools_are_offered() {
    let model = FakeModel::start().await;
    model.push(text_reply(&["SEARCH: vacuum full"]));
    let agent = agent(&model).await;
    let ctx = ToolContext::new(uuid::Uuid::new_v4(), None, Permission::User);
    let (reason, events) = run_tags(&agent, &ctx).await;
    assert_eq!(reason, FinishReason::Stop);
    assert_eq!(text_of(&events), "SEARCH: vacuum full");
    let first = &model.requests()[0];
    // The two available tools, the untagged one too.
    assert_eq!(first["tools"].as_array().unwrap().len(), 2);
    assert_eq!(first["messages"][0]["role"], "user");
}

#[tokio::test]
async fn in_tags_mode_a_line_that_does_not_fit_is_reported_to_the_model() {
    let model = FakeModel::start().await;
    model.push(text_reply(&["SEARCH:", "\n"]));
    model.push(text_reply(&["SEARCH: vacuum"]));
    model.push(text_reply(&["Found it."]));
    let agent = agent(&model).await;
    let (reason, events) = run_tags(&agent, &tags_ctx()).await;
    assert_eq!(reason, FinishReason::Stop);
    // Nothing ran for the line that did not fit, and the user saw neither line.
    assert_eq!(event_types(&events), ["tool_call", "tool_result"]);
    assert_eq!(text_of(&events), "Found it.");
    let second = &model.requests()[1]["messages"];
    assert_eq!(second[2]["content"], "SEARCH:");
    assert_eq!(
        second[3]["content"],
        "Your call \"SEARCH:\" could not be read: the line \"SEARCH:\" does not fit the form \
         SEARCH: <query> <limit>, e.g. SEARCH: vacuum full. Write it again in one of the forms \
         you were given."
    );
}

/// A tool without a tag is still reachable in tags mode: the prompt names
/// it with its arguments and teaches the `<tool_call>` form, and such a
/// call runs and its result comes back like a tag's.
#[tokio::test]
async fn in_tags_mode_a_tool_without_a_tag_is_taught_and_called_as_text() {
    let model = FakeModel::start().await;
    model.push(text_reply(&bytes(
        "Counting.\n<tool_call>{\"name\": \"count_passages\", \"arguments\": {\"query\": \"vacuum\"}}</tool_call>\n",
    )));
    model.push(text_reply(&["Three passages."]));
    let agent = agent(&model).await;
    let (reason, events) = run_tags(&agent, &tags_ctx()).await;
    assert_eq!(reason, FinishReason::Stop);
    assert_eq!(event_types(&events), ["tool_call", "tool_result"]);
    assert!(
        !text_of(&events).contains("tool_call"),
        "{}",
        text_of(&events)
    );

    let requests = model.requests();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains(
            "Tools without a one-line form (arguments marked ? are optional):\n\
             count_passages(limit?, query) — count matching passages"
        ),
        "{system}"
    );
    assert!(
        system.contains("<tool_call>{\"name\": \"TOOL\""),
        "{system}"
    );
    let messages = requests[1]["messages"].as_array().unwrap();
    // The model reads its own call back, in the form it was taught.
    assert_eq!(
        messages[messages.len() - 2]["content"],
        "Counting.\n<tool_call>{\"arguments\":{\"query\":\"vacuum\"},\"name\":\"count_passages\"}</tool_call>"
    );
    let results = messages.last().unwrap()["content"].as_str().unwrap();
    assert!(results.contains("\"success\":true"), "{results}");

    // With text calls switched off there is no way to write it: not taught.
    let model = FakeModel::start().await;
    model.push(text_reply(&["Nothing to do."]));
    let mut config = AgentConfig::new(model.base_url(), "test-model");
    config.text_calls = false;
    let agent = Agent::new(config, registry()).unwrap();
    run_tags(&agent, &tags_ctx()).await;
    let system = model.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!system.contains("count_passages"), "{system}");
    assert!(system.contains("SEARCH: <query>"), "{system}");
}
