//! The text tool-call parser against a table of real-looking model replies,
//! each also streamed in every two-way split, character by character and in
//! random chunks; plus latency, think-start modes and linear work.

#[path = "textcalls/cases.rs"]
mod textcall_cases;

use data_plane_agent::textcalls::{Segment, StreamParser, TextCall, ThinkStart};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const KNOWN: &[&str] = &[
    "search_documents",
    "read_document",
    "grep_documents",
    "web_search",
    "fetch_url",
    "list_spaces",
    "write_file",
];

/// Markup that must never reach the user (unless quoted as inline code).
const MARKUP: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "<think>",
    "</think>",
    "<function name=",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "<function_call>",
    "</function_call>",
    "<arg_key>",
    "<arg_value>",
];

#[derive(Debug, Clone, PartialEq)]
pub enum Exp {
    Text(&'static str),
    Call(&'static str, Value),
    /// A malformed segment whose reason starts with this.
    Malformed(&'static str),
}

pub fn t(text: &'static str) -> Exp {
    Exp::Text(text)
}

pub fn c(name: &'static str, arguments: Value) -> Exp {
    Exp::Call(name, arguments)
}

pub fn m(reason: &'static str) -> Exp {
    Exp::Malformed(reason)
}

fn known() -> Vec<String> {
    KNOWN.iter().map(|s| s.to_string()).collect()
}

/// The offered tools' parameter schemas, which type the arguments.
fn schemas() -> Vec<(String, Value)> {
    let string = json!({"type": "string"});
    let integer = json!({"type": "integer"});
    let tool = |name: &str, properties: Value, required: &str| {
        (
            name.to_string(),
            json!({"type": "object", "properties": properties, "required": [required]}),
        )
    };
    vec![
        tool(
            "search_documents",
            json!({"query": string, "limit": integer, "filters": {"type": ["object", "null"]}}),
            "query",
        ),
        tool(
            "read_document",
            json!({"document_id": string, "offset": integer, "length": integer}),
            "document_id",
        ),
        tool(
            "grep_documents",
            json!({"pattern": string, "case_sensitive": {"type": "boolean"}, "paths": {"type": "array"}}),
            "pattern",
        ),
        tool(
            "web_search",
            json!({"query": string, "count": {"anyOf": [integer, {"type": "null"}]}, "score": {"type": "number"}}),
            "query",
        ),
        tool("fetch_url", json!({"url": string}), "url"),
        (
            "write_file".to_string(),
            json!({"type": "object", "additionalProperties": false,
                "properties": {"path": string, "content": string, "mode": {"type": ["string", "null"]}},
                "required": ["path", "content"]}),
        ),
        (
            "list_spaces".to_string(),
            json!({"type": "object", "properties": {"limit": integer}}),
        ),
    ]
}

fn parser(known_tools: &[String]) -> StreamParser {
    let schemas = schemas()
        .into_iter()
        .filter(|(name, _)| known_tools.contains(name));
    StreamParser::new(known_tools.to_vec()).schemas(schemas)
}

/// Adjacent text segments joined: how a delta lands is not behaviour.
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

fn stream(chunks: &[&str], known_tools: &[String]) -> Vec<Segment> {
    let mut parser = parser(known_tools);
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend(parser.push(chunk));
    }
    out.extend(parser.finish());
    coalesce(out)
}

fn matches(got: &[Segment], expected: &[Exp], input: &str) -> bool {
    got.len() == expected.len()
        && got.iter().zip(expected).all(|(g, e)| match (g, e) {
            (Segment::Text(g), Exp::Text(e)) => g == e,
            (Segment::Call(TextCall { name, arguments }), Exp::Call(n, a)) => {
                name == n && arguments == a
            }
            (Segment::Malformed { raw, reason }, Exp::Malformed(r)) => {
                reason.starts_with(r) && !raw.is_empty() && input.contains(raw.as_str())
            }
            _ => false,
        })
}

/// Markup in a text segment that is not quoted as inline code.
fn leaked_markup(segments: &[Segment]) -> Option<String> {
    segments.iter().find_map(|segment| {
        let Segment::Text(text) = segment else {
            return None;
        };
        MARKUP.iter().find_map(|tag| {
            text.match_indices(tag)
                .find(|(at, _)| !text[..*at].ends_with('`'))
                .map(|_| format!("{tag} in {text:?}"))
        })
    })
}

/// Parses `input` whole and streamed in many ways; returns what went wrong.
fn check(input: &str, known_tools: &[String], expected: &[Exp]) -> Vec<String> {
    let mut problems = Vec::new();
    let whole = stream(&[input], known_tools);
    if !matches(&whole, expected, input) {
        problems.push(format!("expected {expected:?}\n   got {whole:?}"));
    }
    if let Some(leak) = leaked_markup(&whole) {
        problems.push(format!("markup reached the user: {leak}"));
    }
    let bounds: Vec<usize> = input
        .char_indices()
        .map(|(at, _)| at)
        .chain([input.len()])
        .collect();
    for &at in &bounds {
        let got = stream(&[&input[..at], &input[at..]], known_tools);
        if got != whole {
            problems.push(format!("split at {at}: {got:?}\n   whole {whole:?}"));
            break;
        }
    }
    let chars: Vec<&str> = bounds.windows(2).map(|w| &input[w[0]..w[1]]).collect();
    let got = stream(&chars, known_tools);
    if got != whole {
        problems.push(format!("char by char: {got:?}\n   whole {whole:?}"));
    }
    let mut rng = StdRng::seed_from_u64(input.len() as u64);
    for _ in 0..40 {
        let mut chunks = Vec::new();
        let mut at = 0;
        while at < bounds.len() - 1 {
            let next = (at + rng.random_range(1..=8)).min(bounds.len() - 1);
            chunks.push(&input[bounds[at]..bounds[next]]);
            at = next;
        }
        let got = stream(&chunks, known_tools);
        if got != whole {
            problems.push(format!("chunks {chunks:?}: {got:?}\n   whole {whole:?}"));
            break;
        }
    }
    problems
}

pub struct Case {
    name: &'static str,
    input: &'static str,
    expected: Vec<Exp>,
}

pub fn case(name: &'static str, input: &'static str, expected: Vec<Exp>) -> Case {
    Case {
        name,
        input,
        expected,
    }
}

fn cases() -> Vec<Case> {
    vec![
        // Plain prose, including things that look a little like markup.
        case(
            "plain prose",
            "The answer is 42.",
            vec![t("The answer is 42.")],
        ),
        case(
            "comparisons in prose",
            "If a < b and b > c, then a < c unless c <= 0.",
            vec![t("If a < b and b > c, then a < c unless c <= 0.")],
        ),
        case(
            "html answer",
            "Use <div class=\"box\"><b>bold</b></div> for that.\n<br/>",
            vec![t(
                "Use <div class=\"box\"><b>bold</b></div> for that.\n<br/>",
            )],
        ),
        case(
            "words that start like tags",
            "The <tool_calls> field and <tool_callback> differ; <functional> too, <thinking> also.",
            vec![t(
                "The <tool_calls> field and <tool_callback> differ; <functional> too, <thinking> also.",
            )],
        ),
        case(
            "tags quoted as inline code",
            "Wrap the JSON in `<tool_call>` and `</tool_call>`, or use `<function=NAME>`.",
            vec![t(
                "Wrap the JSON in `<tool_call>` and `</tool_call>`, or use `<function=NAME>`.",
            )],
        ),
        case(
            "markdown link at line start",
            "See below.\n[the docs](https://example.com/docs) explain it.",
            vec![t(
                "See below.\n[the docs](https://example.com/docs) explain it.",
            )],
        ),
        case(
            "footnotes at line start",
            "Claim one.[1]\n\n[1] Smith, 2020.\n[2] Jones, 2021.",
            vec![t("Claim one.[1]\n\n[1] Smith, 2020.\n[2] Jones, 2021.")],
        ),
        case(
            "json array the user asked for",
            "Here you go:\n[{\"id\": 1, \"title\": \"a\"}, {\"id\": 2, \"title\": \"b\"}]\nDone.",
            vec![t(
                "Here you go:\n[{\"id\": 1, \"title\": \"a\"}, {\"id\": 2, \"title\": \"b\"}]\nDone.",
            )],
        ),
        case(
            "json array of people with names",
            "[{\"name\": \"Alice\", \"age\": 30}, {\"name\": \"Bob\", \"age\": 25}]",
            vec![t(
                "[{\"name\": \"Alice\", \"age\": 30}, {\"name\": \"Bob\", \"age\": 25}]",
            )],
        ),
        case(
            "call-shaped array with unknown names",
            "[{\"name\": \"make_coffee\", \"arguments\": {\"size\": \"large\"}}]",
            vec![t(
                "[{\"name\": \"make_coffee\", \"arguments\": {\"size\": \"large\"}}]",
            )],
        ),
        case("array of numbers", "[1, 2, 3]", vec![t("[1, 2, 3]")]),
        case("empty array", "Nothing:\n[]", vec![t("Nothing:\n[]")]),
        case(
            "python in a fence",
            "```python\nxs = [1, 2]\nif a < b:\n    print(xs)\n```",
            vec![t("```python\nxs = [1, 2]\nif a < b:\n    print(xs)\n```")],
        ),
        case(
            "json fence holding an object",
            "```json\n{\"name\": \"search_documents\"}\n```",
            vec![t("```json\n{\"name\": \"search_documents\"}\n```")],
        ),
        case(
            "unicode prose",
            "Ça marche — 東京 < 大阪? 🚀 [x]",
            vec![t("Ça marche — 東京 < 大阪? 🚀 [x]")],
        ),
        case(
            "partial tag at the very end",
            "See <tool_",
            vec![t("See <tool_")],
        ),
        // <tool_call>{json}</tool_call>
        case(
            "hermes single call",
            "<tool_call>\n{\"name\": \"search_documents\", \"arguments\": {\"query\": \"rust async\"}}\n</tool_call>",
            vec![c("search_documents", json!({"query": "rust async"}))],
        ),
        case(
            "text before a call",
            "Let me search for that.\n\n<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"tokio select\"}}\n</tool_call>",
            vec![
                t("Let me search for that."),
                c("web_search", json!({"query": "tokio select"})),
            ],
        ),
        case(
            "text after a call",
            "<tool_call>{\"name\": \"read_document\", \"arguments\": {\"id\": \"d1\"}}</tool_call>\nI will wait for the result.",
            vec![
                c("read_document", json!({"id": "d1"})),
                t("I will wait for the result."),
            ],
        ),
        case(
            "two calls in a row",
            "<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"a\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"b\"}}\n</tool_call>",
            vec![
                c("web_search", json!({"query": "a"})),
                c("web_search", json!({"query": "b"})),
            ],
        ),
        case(
            "text between calls",
            "First the docs.\n<tool_call>{\"name\": \"search_documents\", \"arguments\": {\"query\": \"x\"}}</tool_call>\nThen the web.\n<tool_call>{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}</tool_call>\nThat is all.",
            vec![
                t("First the docs."),
                c("search_documents", json!({"query": "x"})),
                t("Then the web."),
                c("web_search", json!({"query": "x"})),
                t("That is all."),
            ],
        ),
        case(
            "arguments as a json string",
            "<tool_call>{\"name\": \"read_document\", \"arguments\": \"{\\\"id\\\": \\\"doc-1\\\", \\\"page\\\": 2}\"}</tool_call>",
            vec![c("read_document", json!({"id": "doc-1", "page": 2}))],
        ),
        case(
            "arguments missing",
            "<tool_call>{\"name\": \"search_documents\"}</tool_call>",
            vec![c("search_documents", json!({}))],
        ),
        case(
            "parameters as a synonym",
            "<tool_call>{\"name\": \"fetch_url\", \"parameters\": {\"url\": \"https://example.com\"}}</tool_call>",
            vec![c("fetch_url", json!({"url": "https://example.com"}))],
        ),
        case(
            "nested json arguments",
            "<tool_call>{\"name\": \"search_documents\", \"arguments\": {\"query\": \"q\", \"filters\": {\"tags\": [\"a\", \"b\"], \"range\": {\"from\": 1, \"to\": [2, {\"x\": null}]}}}}</tool_call>",
            vec![c(
                "search_documents",
                json!({"query": "q", "filters": {"tags": ["a", "b"], "range": {"from": 1, "to": [2, {"x": null}]}}}),
            )],
        ),
        case(
            "strings with braces and quotes",
            "<tool_call>{\"name\": \"grep_documents\", \"arguments\": {\"pattern\": \"fn main() { println!(\\\"{}\\\", x); }\"}}</tool_call>",
            vec![c(
                "grep_documents",
                json!({"pattern": "fn main() { println!(\"{}\", x); }"}),
            )],
        ),
        case(
            "escaped newlines and unicode",
            "<tool_call>{\"name\": \"web_search\", \"arguments\": {\"query\": \"caf\\u00e9\\nline two \\ud83d\\ude00\"}}</tool_call>",
            vec![c("web_search", json!({"query": "café\nline two 😀"}))],
        ),
        case(
            "string holding angle brackets",
            "<tool_call>{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://example.com/?q=<b>&x=</tool\"}}</tool_call>",
            vec![c(
                "fetch_url",
                json!({"url": "https://example.com/?q=<b>&x=</tool"}),
            )],
        ),
        case(
            "closing tag quoted inside a json string",
            "<tool_call>{\"name\": \"fetch_url\", \"arguments\": {\"note\": \"ends with </tool_call> here\"}}</tool_call>\nAfter.",
            vec![
                c("fetch_url", json!({"note": "ends with </tool_call> here"})),
                t("After."),
            ],
        ),
        case(
            "unclosed json string ends at the first closing tag",
            "<tool_call>{\"name\": \"web_search\", \"arguments\": {\"query\": \"x}}</tool_call>\nStill shown.",
            vec![
                m("invalid json in tool_call: eof while parsing a string"),
                t("Still shown."),
            ],
        ),
        case(
            "openai nested function form",
            "<tool_call>{\"type\": \"function\", \"function\": {\"name\": \"web_search\", \"arguments\": \"{\\\"query\\\": \\\"x\\\"}\"}}</tool_call>",
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "fenced json inside tool_call",
            "<tool_call>\n```json\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}\n```\n</tool_call>",
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "array of calls inside one tool_call",
            "<tool_call>[{\"name\": \"web_search\", \"arguments\": {\"query\": \"a\"}}, {\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://a.example\"}}]</tool_call>",
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "https://a.example"})),
            ],
        ),
        case(
            "two objects inside one tool_call",
            "<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"a\"}}\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"b\"}}\n</tool_call>",
            vec![
                c("web_search", json!({"query": "a"})),
                c("web_search", json!({"query": "b"})),
            ],
        ),
        case(
            "unknown name in explicit markup is still a call",
            "<tool_call>{\"name\": \"serach_documents\", \"arguments\": {\"query\": \"x\"}}</tool_call>",
            vec![c("serach_documents", json!({"query": "x"}))],
        ),
        case(
            "crlf line endings",
            "Checking.\r\n<tool_call>\r\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}\r\n</tool_call>\r\nDone.",
            vec![
                t("Checking."),
                c("web_search", json!({"query": "x"})),
                t("Done."),
            ],
        ),
        case(
            "unicode around a call",
            "Je cherche 東京 🚀\n<tool_call>{\"name\": \"web_search\", \"arguments\": {\"query\": \"東京 天気\"}}</tool_call>\nVoilà ✓",
            vec![
                t("Je cherche 東京 🚀"),
                c("web_search", json!({"query": "東京 天気"})),
                t("Voilà ✓"),
            ],
        ),
        // <function=NAME><parameter=K>V</parameter></function>
        case(
            "qwen3-coder call wrapped in tool_call",
            "<tool_call>\n<function=search_documents>\n<parameter=query>\nrust async\n</parameter>\n<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>",
            vec![c(
                "search_documents",
                json!({"query": "rust async", "limit": 5}),
            )],
        ),
        case(
            "bare function call",
            "<function=read_document>\n<parameter=id>\ndoc-7\n</parameter>\n</function>",
            vec![c("read_document", json!({"id": "doc-7"}))],
        ),
        case(
            "multi-line parameter value",
            "<function=grep_documents>\n<parameter=pattern>\nfn main() {\n    println!(\"hi\");\n}\n</parameter>\n</function>",
            vec![c(
                "grep_documents",
                json!({"pattern": "fn main() {\n    println!(\"hi\");\n}"}),
            )],
        ),
        case(
            "json-typed parameter values",
            "<function=search_documents>\n<parameter=filters>\n{\"tags\": [\"x\"], \"year\": 2024}\n</parameter>\n<parameter=exact>\ntrue\n</parameter>\n<parameter=ids>\n[1, 2]\n</parameter>\n<parameter=score>\n-0.5\n</parameter>\n</function>",
            vec![c(
                "search_documents",
                json!({"filters": {"tags": ["x"], "year": 2024}, "exact": true, "ids": [1, 2], "score": -0.5}),
            )],
        ),
        case(
            "quoted parameter stays text",
            "<function=web_search><parameter=query>\"exact phrase\"</parameter></function>",
            vec![c("web_search", json!({"query": "\"exact phrase\""}))],
        ),
        case(
            "parameter with angle brackets",
            "<function=grep_documents><parameter=pattern>a < b && c > d</parameter></function>",
            vec![c("grep_documents", json!({"pattern": "a < b && c > d"}))],
        ),
        case(
            "json-looking text parameter stays text",
            "<function=web_search><parameter=query>2024 election results</parameter></function>",
            vec![c("web_search", json!({"query": "2024 election results"}))],
        ),
        case(
            "missing parameter closing tags",
            "<function=search_documents>\n<parameter=query>\nrust\n<parameter=limit>\n3\n</function>",
            vec![c("search_documents", json!({"query": "rust", "limit": 3}))],
        ),
        case(
            "function without parameters",
            "<tool_call>\n<function=search_documents>\n</function>\n</tool_call>",
            vec![c("search_documents", json!({}))],
        ),
        case(
            "the blanks around a value are layout",
            "<function=web_search><parameter=query>\n\n    indented\n  two\n\n  </parameter></function>",
            vec![c("web_search", json!({"query": "indented\n  two"}))],
        ),
        case(
            "text then two function calls",
            "I'll read both files.\n<tool_call>\n<function=read_document>\n<parameter=id>\na\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=read_document>\n<parameter=id>\nb\n</parameter>\n</function>\n</tool_call>",
            vec![
                t("I'll read both files."),
                c("read_document", json!({"id": "a"})),
                c("read_document", json!({"id": "b"})),
            ],
        ),
        case(
            "wrapped function missing its closing tag",
            "<tool_call>\n<function=web_search>\n<parameter=query>\nx\n</parameter>\n</tool_call>",
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "unknown function name is still a call",
            "<function=delete_everything>\n<parameter=sure>\ntrue\n</parameter>\n</function>",
            vec![c("delete_everything", json!({"sure": true}))],
        ),
        // <think>…</think>
        case(
            "think then answer",
            "<think>\nThe user wants X. I should answer directly.\n</think>\n\nX is a letter.",
            vec![t("X is a letter.")],
        ),
        case(
            "think then call",
            "<think>\nI need to search.\n</think>\n\n<tool_call>\n{\"name\": \"search_documents\", \"arguments\": {\"query\": \"x\"}}\n</tool_call>",
            vec![c("search_documents", json!({"query": "x"}))],
        ),
        case(
            "markup inside think is dropped",
            "<think>Maybe <tool_call>{\"name\": \"web_search\"}</tool_call>? Or [{\"name\": \"web_search\"}]</think>The answer.",
            vec![t("The answer.")],
        ),
        case(
            "think in the middle of text",
            "Let me check. <think>hmm, is it 4?</think> It is 4.",
            vec![t("Let me check. It is 4.")],
        ),
        case(
            "unclosed think at the end",
            "<think>I am still thinking about",
            vec![],
        ),
        case(
            "unclosed think after text",
            "Sure.\n<think>wait, actually the user",
            vec![t("Sure.")],
        ),
        case(
            "think opened by the template",
            "The user asks about X. I'll answer directly.\n</think>\n\nX is a letter.",
            vec![t("X is a letter.")],
        ),
        case(
            "think opened by the template, then a call",
            "I should look it up.</think>\n<tool_call>{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}</tool_call>",
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "two think blocks around a call",
            "<think>first</think>\n<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>\n<think>second</think>\nAll done.",
            vec![c("web_search", json!({})), t("All done.")],
        ),
        case(
            "stray think close after shown text",
            "Answer first.\n<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>\nMore.</think> End.",
            vec![
                t("Answer first."),
                c("web_search", json!({})),
                t("More. End."),
            ],
        ),
        // Bare JSON arrays of calls.
        case(
            "bare array as the whole reply",
            "[{\"name\": \"search_documents\", \"arguments\": {\"query\": \"x\"}}]",
            vec![c("search_documents", json!({"query": "x"}))],
        ),
        case(
            "bare array of two calls",
            "[\n  {\"name\": \"web_search\", \"arguments\": {\"query\": \"a\"}},\n  {\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://b.example\"}}\n]",
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "https://b.example"})),
            ],
        ),
        case(
            "bare array in a json fence",
            "```json\n[{\"name\": \"web_search\", \"arguments\": {\"query\": \"a\"}}]\n```",
            vec![c("web_search", json!({"query": "a"}))],
        ),
        case(
            "bare array between text",
            "I'll run two searches.\n[{\"name\": \"web_search\", \"arguments\": {\"query\": \"a\"}}, {\"name\": \"search_documents\", \"arguments\": {\"query\": \"a\"}}]\nThen I'll summarise.",
            vec![
                t("I'll run two searches."),
                c("web_search", json!({"query": "a"})),
                c("search_documents", json!({"query": "a"})),
                t("Then I'll summarise."),
            ],
        ),
        case(
            "bare array with one unknown name is text",
            "[{\"name\": \"web_search\", \"arguments\": {}}, {\"name\": \"order_pizza\", \"arguments\": {}}]",
            vec![t(
                "[{\"name\": \"web_search\", \"arguments\": {}}, {\"name\": \"order_pizza\", \"arguments\": {}}]",
            )],
        ),
        case(
            "bare array inside a sentence is text",
            "Call it like [{\"name\": \"web_search\", \"arguments\": {}}] in your code.",
            vec![t(
                "Call it like [{\"name\": \"web_search\", \"arguments\": {}}] in your code.",
            )],
        ),
        case(
            "bare array followed by words on its line is text",
            "[{\"name\": \"web_search\", \"arguments\": {}}] is the format.",
            vec![t(
                "[{\"name\": \"web_search\", \"arguments\": {}}] is the format.",
            )],
        ),
        case(
            "bare array with string arguments",
            "[{\"name\": \"read_document\", \"arguments\": \"{\\\"document_id\\\": \\\"d9\\\"}\"}]",
            vec![c("read_document", json!({"document_id": "d9"}))],
        ),
        case(
            "indented bare array",
            "Plan:\n   [{\"name\": \"web_search\", \"arguments\": {\"query\": \"z\"}}]\n",
            vec![t("Plan:"), c("web_search", json!({"query": "z"}))],
        ),
        case(
            "bare array strings with brackets",
            "[{\"arguments\": {\"pattern\": \"[a-z]+ {2} ]]\\\"[\"}, \"name\": \"grep_documents\"}]",
            vec![c("grep_documents", json!({"pattern": "[a-z]+ {2} ]]\"["}))],
        ),
        case(
            "think then a bare array on the same line",
            "<think>two lookups</think>[{\"name\": \"web_search\", \"arguments\": {\"query\": \"a\"}}]",
            vec![c("web_search", json!({"query": "a"}))],
        ),
        case(
            "call then footnote-like text on the same line",
            "<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>[1] see above",
            vec![c("web_search", json!({})), t("[1] see above")],
        ),
        case(
            "mistral marker before prose: the marker goes, the prose stays",
            "[TOOL_CALLS] none needed today.",
            vec![t("none needed today.")],
        ),
        // Truncated and malformed markup.
        case(
            "truncated tool_call",
            "<tool_call>{\"name\": \"search_documents\", \"argu",
            vec![m("unterminated tool_call")],
        ),
        case(
            "truncated tool_call after text",
            "Searching now.\n<tool_call>\n{\"name\": \"web_search\"",
            vec![t("Searching now."), m("unterminated tool_call")],
        ),
        case(
            "complete json without its closing tag",
            "<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}\n</tool_",
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "invalid json",
            "<tool_call>{\"name\": \"search_documents\", \"arguments\": {query: x}}</tool_call>",
            vec![m("invalid json in tool_call: key must be a string")],
        ),
        case(
            "missing name",
            "<tool_call>{\"arguments\": {\"query\": \"x\"}}</tool_call>",
            vec![m("tool call without a name")],
        ),
        case(
            "name not a string",
            "<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call>",
            vec![m("tool call name is not a string: 7")],
        ),
        case(
            "function without a name",
            "<function=>\n<parameter=query>x</parameter>\n</function>",
            vec![m("function tag without a name")],
        ),
        case(
            "truncated function",
            "Reading it.\n<function=read_document>\n<parameter=id>\ndoc",
            vec![t("Reading it."), m("unterminated function call")],
        ),
        case(
            "arguments not an object",
            "<tool_call>{\"name\": \"web_search\", \"arguments\": [1, 2]}</tool_call>",
            vec![m("arguments of web_search are not a json object: [1,2]")],
        ),
        case(
            "arguments as a plain string fill the one required parameter",
            "<tool_call>{\"name\": \"web_search\", \"arguments\": \"rust\"}</tool_call>",
            vec![c("web_search", json!({"query": "rust"}))],
        ),
        case(
            "prose inside tool_call",
            "<tool_call>search for rust</tool_call>",
            vec![m(
                "tool_call holds neither json nor a function tag: search for rust",
            )],
        ),
        case(
            "empty tool_call",
            "<tool_call>\n</tool_call>",
            vec![m("empty tool_call")],
        ),
        case(
            "parameter tag not closed",
            "<function=web_search><parameter=query</function>",
            vec![m(
                "parameter tag in function web_search is not closed: query",
            )],
        ),
        case(
            "stray text in a function",
            "<function=web_search>hello<parameter=query>x</parameter></function>",
            vec![m("unexpected text in function web_search: hello")],
        ),
        case(
            "malformed call then a good one",
            "<tool_call>{bad}</tool_call>\n<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>",
            vec![m("invalid json in tool_call"), c("web_search", json!({}))],
        ),
        case(
            "truncated bare array of calls",
            "Running:\n[{\"name\": \"search_documents\", \"arguments\": {\"query\": \"ru",
            vec![t("Running:"), m("unterminated json array of tool calls")],
        ),
        case(
            "truncated json array for the user is text",
            "[{\"name\": \"Alice\", \"age\": 3",
            vec![t("[{\"name\": \"Alice\", \"age\": 3")],
        ),
        case(
            "truncated json array hides no call",
            "[{\"name\": \"Alice\",\n<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>",
            vec![t("[{\"name\": \"Alice\","), c("web_search", json!({}))],
        ),
        case(
            "stray closing tags are removed",
            "Done.</tool_call></function>",
            vec![t("Done.")],
        ),
    ]
}

#[test]
fn table_of_model_replies() {
    let known = known();
    let mut cases = cases();
    cases.extend(textcall_cases::families());
    assert!(cases.len() >= 200, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        for problem in check(case.input, &known, &case.expected) {
            failures.push(format!("{}: {problem}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Every reply of the table, neutralised as a tool result is before the
/// model reads it, holds no call any more: a model quoting a document or a
/// page verbatim cannot call a tool. Text without markup is left alone.
#[test]
fn neutralised_text_calls_nothing() {
    use data_plane_agent::textcalls::{neutralise, neutralise_value};
    let known = known();
    let mut cases = cases();
    cases.extend(textcall_cases::families());
    let mut failures = Vec::new();
    for case in &cases {
        let inert = neutralise(case.input);
        let got = stream(&[&inert], &known);
        if got.iter().any(|s| !matches!(s, Segment::Text(_))) {
            failures.push(format!("{}: {inert:?} still gives {got:?}", case.name));
        }
        let quoted = format!("The page says:\n{inert}\nEnd of quote.");
        let got = stream(&[&quoted], &known);
        if got.iter().any(|s| !matches!(s, Segment::Text(_))) {
            failures.push(format!("{} quoted: {got:?}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for plain in [
        "plain text",
        "a < b, [1] and {x}",
        "`<tool_call>` in code",
        "",
    ] {
        let same = neutralise(plain);
        assert!(
            matches!(same, std::borrow::Cow::Borrowed(_)) || plain.contains('`'),
            "{plain:?} was changed to {same:?}"
        );
    }
    assert_eq!(
        neutralise("Hi <tool_call>{}</tool_call> [TOOL_CALLS]"),
        "Hi ‹tool_call>{}‹/tool_call> ［TOOL_CALLS］"
    );
    assert_eq!(
        neutralise("x\n{\"name\": 1}\n[f(a=1)] and {\"name\": 2} or [{\"x\": 3}]"),
        "x\n{\u{200B}\"name\": 1}\n[\u{200B}f(a=1)] and {\u{200B}\"name\": 2} or [\u{200B}{\"x\": 3}]"
    );
    let value = json!({"title": "<function=web_search>", "links": ["<|python_tag|>"], "n": 1});
    assert_eq!(
        neutralise_value(&value),
        json!({"title": "‹function=web_search>", "links": ["‹|python_tag|>"], "n": 1})
    );
}

/// With text calls switched off (an endpoint that returns native calls),
/// every call form is text; think blocks are still removed.
#[test]
fn text_calls_off_reads_no_call() {
    let inputs = [
        "<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>",
        "[TOOL_CALLS] [{\"name\": \"web_search\", \"arguments\": {}}]",
        "[web_search(query=\"x\")]",
        "{\"name\": \"web_search\", \"parameters\": {}}",
        "<function=web_search><parameter=query>x</parameter></function>",
    ];
    for input in inputs {
        for chunk in [1, 3, input.len()] {
            let mut parser = StreamParser::new(known()).text_calls(false);
            let mut out = Vec::new();
            for piece in input.as_bytes().chunks(chunk) {
                out.extend(parser.push(std::str::from_utf8(piece).expect("ascii")));
            }
            out.extend(parser.finish());
            assert_eq!(
                coalesce(out),
                vec![Segment::Text(input.to_string())],
                "{input:?} in chunks of {chunk}"
            );
        }
    }
    let mut parser = StreamParser::new(known())
        .text_calls(false)
        .think_start(ThinkStart::Closed);
    let mut out = parser.push("<think>hidden</think>Shown <tool_call>x</tool_call>");
    out.extend(parser.finish());
    assert_eq!(
        coalesce(out),
        vec![Segment::Text("Shown <tool_call>x</tool_call>".to_string())]
    );
}

/// What each push releases at once: text that cannot start markup goes out
/// immediately; only a possible tag prefix, whitespace, or a possible array
/// at the start of a line waits.
fn check_released(start: ThinkStart, deltas: &[&str], released: &[&str]) -> Option<String> {
    let mut parser = StreamParser::new(known()).think_start(start);
    let got: Vec<String> = deltas
        .iter()
        .map(|delta| {
            parser
                .push(delta)
                .into_iter()
                .map(|segment| match segment {
                    Segment::Text(text) => text,
                    other => format!("<{other:?}>"),
                })
                .collect()
        })
        .collect();
    (got != released).then(|| format!("{deltas:?}: released {got:?}, expected {released:?}"))
}

#[test]
fn text_is_released_as_soon_as_it_cannot_be_markup() {
    use ThinkStart::{Closed, Unknown};
    let cases: &[(ThinkStart, &[&str], &[&str])] = &[
        (
            Closed,
            &["Hello wor", "ld. How "],
            &["Hello wor", "ld. How"],
        ),
        (Closed, &["a <", " b"], &["a", " < b"]),
        (
            Closed,
            &["See <tool_", "calls> here"],
            &["See", " <tool_calls> here"],
        ),
        (
            Closed,
            &[
                "Let me look.<tool_",
                "call>{\"name\"",
                ": \"x\"}</tool_call>",
            ],
            &[
                "Let me look.",
                "",
                "<Call(TextCall { name: \"x\", arguments: Object {} })>",
            ],
        ),
        (Closed, &["List:\n[", "link](u)"], &["List:", "\n[link](u)"]),
        (Closed, &["x\n[{\"id\"", ": 1}]"], &["x\n[{\"id\"", ": 1}]"]),
        (
            Closed,
            &["x\n[{\"na", "me\": 1}] ok"],
            &["x", "\n[{\"name\": 1}] ok"],
        ),
        // A fence line waits for the first character of the next line,
        // which says whether call markup follows.
        (Closed, &["```py", "thon\nx"], &["", "```python\nx"]),
        (Closed, &["```js", "x\n", "y"], &["", "", "```jsx\ny"]),
        (Closed, &["<think>hid", "den</think> shown"], &["", "shown"]),
        // Unknown: leading text may prove to be reasoning, so it waits.
        (
            Unknown,
            &["Reasoning", " here</think>Answer"],
            &["", "Answer"],
        ),
        (
            Unknown,
            &["Hi", " <think>x</think> there"],
            &["", "Hi there"],
        ),
        (
            Unknown,
            &["Hi", " <tool_call>{\"name\": \"x\"}</tool_call> ok"],
            &[
                "",
                "Hi<Call(TextCall { name: \"x\", arguments: Object {} })>ok",
            ],
        ),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(start, deltas, released)| check_released(*start, deltas, released))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn think_start_modes() {
    let cases: &[(ThinkStart, &str, &str)] = &[
        (ThinkStart::Open, "still thinking", ""),
        (ThinkStart::Open, "reasoning</think>\n\nAnswer.", "Answer."),
        (
            ThinkStart::Open,
            "<tool_call>{}</tool_call> in reasoning</think>Ok",
            "Ok",
        ),
        (
            ThinkStart::Closed,
            "Shown right away.</think> Still shown.",
            "Shown right away. Still shown.",
        ),
        (ThinkStart::Unknown, "Dropped.</think> Shown.", "Shown."),
        (ThinkStart::Unknown, "No think here.", "No think here."),
    ];
    for (start, input, want) in cases {
        let mut parser = StreamParser::new(known()).think_start(*start);
        let mut out = parser.push(input);
        out.extend(parser.finish());
        let got: String = coalesce(out)
            .into_iter()
            .map(|segment| match segment {
                Segment::Text(text) => text,
                other => panic!("{input:?}: unexpected {other:?}"),
            })
            .collect();
        assert_eq!(&got, want, "{start:?} {input:?}");
    }
}

/// A megabyte streamed in 4-byte deltas, in shapes that would make a parser
/// that re-scans its buffer quadratic: the bytes examined must stay a small
/// multiple of the input.
#[test]
fn work_is_linear_in_the_input() {
    const SIZE: usize = 1 << 20;
    let fill = |unit: &str| unit.repeat(SIZE / unit.len());
    let one_call =
        |arguments: &str| format!("[{{\"name\": \"web_search\", \"arguments\": {arguments}}}]");
    let many_calls = {
        let call = "{\"name\": \"web_search\", \"arguments\": {\"query\": \"x [ { ] } \\\" y\"}}";
        let n = SIZE / (call.len() + 2);
        format!("[{}]", vec![call; n].join(", "))
    };
    let shapes: Vec<(&str, String, usize)> = vec![
        (
            "prose with < and [ at line starts",
            fill("a < b <to <th [x]\n[1] c\n"),
            0,
        ),
        (
            "one long tool_call",
            format!(
                "<tool_call>{{\"name\": \"web_search\", \"arguments\": {{\"query\": \"{}\"}}}}</tool_call>",
                fill("ab<c/ ")
            ),
            1,
        ),
        (
            "one long parameter",
            format!(
                "<function=web_search><parameter=query>{}</parameter></function>",
                fill("line < of text\n")
            ),
            1,
        ),
        (
            "long think",
            format!("<think>{}</think>ok", fill("hmm </thin <think ")),
            0,
        ),
        ("bare array of many calls", many_calls, SIZE / 72),
        (
            "long json for the user",
            format!(
                "[{{\"name\": \"x\", \"items\": [{}]}}]",
                fill("{\"a\": [1, \"]\"]}, ")
            ),
            0,
        ),
        (
            "one long bare-array argument",
            one_call(&format!("{{\"q\": \"{}\"}}", fill("[{"))),
            1,
        ),
    ];
    for (name, mut input, min_calls) in shapes {
        // Ending the line lets every decision happen during the pushes,
        // where the work is counted.
        input.push('\n');
        let mut parser = StreamParser::new(known());
        let mut calls = 0;
        let mut count = |segments: Vec<Segment>| {
            calls += segments
                .iter()
                .filter(|s| matches!(s, Segment::Call(_)))
                .count();
        };
        for chunk in input.as_bytes().chunks(4) {
            count(parser.push(std::str::from_utf8(chunk).expect("ascii input")));
        }
        let examined = parser.bytes_examined();
        let rest = parser.finish();
        assert!(
            rest.iter().all(|s| matches!(s, Segment::Text(_))),
            "{name}: decided only at the end"
        );
        count(rest);
        println!(
            "{name}: {:.2} bytes examined per input byte",
            examined as f64 / input.len() as f64
        );
        assert!(
            examined <= 8 * input.len(),
            "{name}: {examined} bytes examined for {} of input",
            input.len()
        );
        assert!(
            calls >= min_calls,
            "{name}: {calls} calls, expected {min_calls}"
        );
    }
}
