//! Replies in the forms of the common local-model families: Mistral's
//! `[TOOL_CALLS]`, Llama 3.x JSON objects, Hermes-style variants, Python
//! call lists, values typed by the tools' schemas, the policies where
//! inference servers disagree, and prose that must stay prose.

use serde_json::json;

use super::{Case, c, case, m, t};

pub fn families() -> Vec<Case> {
    let mut cases = mistral();
    cases.extend(llama_json());
    cases.extend(hermes_variants());
    cases.extend(pythonic());
    cases.extend(typed_values());
    cases.extend(policies());
    cases.extend(prose());
    cases
}

fn mistral() -> Vec<Case> {
    vec![
        case(
            "mistral array",
            r#"[TOOL_CALLS] [{"name": "search_documents", "arguments": {"query": "rust"}}]"#,
            vec![c("search_documents", json!({"query": "rust"}))],
        ),
        case(
            "mistral array without a space",
            r#"[TOOL_CALLS][{"name":"web_search","arguments":{"query":"a"}}]"#,
            vec![c("web_search", json!({"query": "a"}))],
        ),
        case(
            "mistral two calls",
            r#"[TOOL_CALLS][{"name": "web_search", "arguments": {"query": "a"}}, {"name": "fetch_url", "arguments": {"url": "https://x.org"}}]"#,
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "https://x.org"})),
            ],
        ),
        case(
            "mistral with text before",
            r#"Let me check.[TOOL_CALLS] [{"name":"web_search","arguments":{"query":"b"}}]"#,
            vec![t("Let me check."), c("web_search", json!({"query": "b"}))],
        ),
        case(
            "mistral with text and a newline before",
            "I will look that up.\n\n[TOOL_CALLS] [{\"name\": \"web_search\", \"arguments\": {\"query\": \"c\"}}]",
            vec![
                t("I will look that up."),
                c("web_search", json!({"query": "c"})),
            ],
        ),
        case(
            "mistral junk word between marker and array",
            "[TOOL_CALLS]json\n[{\"name\": \"web_search\", \"arguments\": {\"query\": \"d\"}}]",
            vec![c("web_search", json!({"query": "d"}))],
        ),
        case(
            "mistral junk phrase between marker and array",
            r#"[TOOL_CALLS] calls: [{"name": "web_search", "arguments": {"query": "e"}}]"#,
            vec![c("web_search", json!({"query": "e"}))],
        ),
        case(
            "mistral fence between marker and array",
            "[TOOL_CALLS]```json\n[{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://a.b\"}}]\n```",
            vec![c("fetch_url", json!({"url": "https://a.b"}))],
        ),
        case(
            "mistral newline after the marker",
            "[TOOL_CALLS]\n[{\"name\": \"read_document\", \"arguments\": {\"document_id\": \"doc-1\"}}]",
            vec![c("read_document", json!({"document_id": "doc-1"}))],
        ),
        case(
            "mistral name and ARGS",
            r#"[TOOL_CALLS]search_documents[ARGS]{"query": "x", "limit": 3}"#,
            vec![c("search_documents", json!({"query": "x", "limit": 3}))],
        ),
        case(
            "mistral name and object",
            r#"[TOOL_CALLS]search_documents{"query": "x"}"#,
            vec![c("search_documents", json!({"query": "x"}))],
        ),
        case(
            "mistral name, space and object",
            r#"[TOOL_CALLS] web_search {"query": "spaced"}"#,
            vec![c("web_search", json!({"query": "spaced"}))],
        ),
        case(
            "mistral several named calls",
            r#"[TOOL_CALLS]web_search[ARGS]{"query": "a"}[TOOL_CALLS]fetch_url[ARGS]{"url": "u"}"#,
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "u"})),
            ],
        ),
        case(
            "mistral named calls back to back",
            r#"[TOOL_CALLS]web_search{"query": "a"}fetch_url{"url": "u"}"#,
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "u"})),
            ],
        ),
        case(
            "mistral call id",
            r#"[TOOL_CALLS]web_search[CALL_ID]abc123XYZ[ARGS]{"query": "q"}"#,
            vec![c("web_search", json!({"query": "q"}))],
        ),
        case(
            "mistral ids in the array",
            r#"[TOOL_CALLS] [{"name": "web_search", "arguments": {"query": "f"}, "id": "a1B2c3D4e"}]"#,
            vec![c("web_search", json!({"query": "f"}))],
        ),
        case(
            "mistral unknown name is a call",
            r#"[TOOL_CALLS] [{"name": "make_coffee", "arguments": {}}]"#,
            vec![c("make_coffee", json!({}))],
        ),
        case(
            "mistral arguments as a json string",
            r#"[TOOL_CALLS] [{"name": "web_search", "arguments": "{\"query\": \"g\"}"}]"#,
            vec![c("web_search", json!({"query": "g"}))],
        ),
        case(
            "mistral single object",
            r#"[TOOL_CALLS] {"name": "web_search", "arguments": {"query": "h"}}"#,
            vec![c("web_search", json!({"query": "h"}))],
        ),
        case(
            "mistral invalid json",
            r#"[TOOL_CALLS] [{"name": "web_search", "arguments": {"query": }}]"#,
            vec![m("invalid json after [TOOL_CALLS]")],
        ),
        case(
            "mistral cut off",
            r#"[TOOL_CALLS] [{"name": "web_search", "argum"#,
            vec![m("invalid json after [TOOL_CALLS]")],
        ),
        case(
            "mistral marker in a sentence",
            "No tools needed.[TOOL_CALLS] The answer is 4.",
            vec![t("No tools needed. The answer is 4.")],
        ),
        case(
            "mistral marker alone",
            "Let me search.[TOOL_CALLS]",
            vec![t("Let me search."), m("no tool call after [TOOL_CALLS]")],
        ),
        case(
            "mistral marker and prose",
            "[TOOL_CALLS] I cannot call tools here.",
            vec![t("I cannot call tools here.")],
        ),
        case(
            "mistral marker and prose after text",
            "Sure.\n[TOOL_CALLS]\nNo search is needed.",
            vec![t("Sure.\nNo search is needed.")],
        ),
        case(
            "mistral text after the calls",
            "[TOOL_CALLS] [{\"name\": \"web_search\", \"arguments\": {\"query\": \"i\"}}]\nI will wait for the results.",
            vec![
                c("web_search", json!({"query": "i"})),
                t("I will wait for the results."),
            ],
        ),
        case(
            "mistral after reasoning",
            r#"<think>need a search</think>[TOOL_CALLS][{"name":"web_search","arguments":{"query":"j"}}]"#,
            vec![c("web_search", json!({"query": "j"}))],
        ),
        case(
            "mistral unicode arguments",
            r#"[TOOL_CALLS][{"name": "web_search", "arguments": {"query": "東京の天気 🌧"}}]"#,
            vec![c("web_search", json!({"query": "東京の天気 🌧"}))],
        ),
        case(
            "mistral braces inside a string",
            r#"[TOOL_CALLS]grep_documents[ARGS]{"pattern": "fn \\w+\\(\\) \\{ }"}"#,
            vec![c(
                "grep_documents",
                json!({"pattern": "fn \\w+\\(\\) \\{ }"}),
            )],
        ),
        case(
            "mistral nested arguments",
            r#"[TOOL_CALLS][{"name": "search_documents", "arguments": {"query": "k", "filters": {"tags": ["a", "b"], "year": 2024}}}]"#,
            vec![c(
                "search_documents",
                json!({"query": "k", "filters": {"tags": ["a", "b"], "year": 2024}}),
            )],
        ),
        case(
            "mistral type-function shape",
            r#"[TOOL_CALLS][{"type": "function", "function": {"name": "web_search", "arguments": {"query": "l"}}}]"#,
            vec![c("web_search", json!({"query": "l"}))],
        ),
        case(
            "mistral marker quoted as inline code",
            "Mistral writes `[TOOL_CALLS]` before its calls.",
            vec![t("Mistral writes `[TOOL_CALLS]` before its calls.")],
        ),
        case(
            "mistral-like prefix at the end",
            "See [TOOL",
            vec![t("See [TOOL")],
        ),
        case(
            "bracketed word like the marker",
            "[TOOL_CALL] is not the marker, [TOOLS] neither.",
            vec![t("[TOOL_CALL] is not the marker, [TOOLS] neither.")],
        ),
    ]
}

fn llama_json() -> Vec<Case> {
    vec![
        case(
            "llama object with parameters",
            r#"{"name": "web_search", "parameters": {"query": "rust"}}"#,
            vec![c("web_search", json!({"query": "rust"}))],
        ),
        case(
            "llama object with arguments",
            r#"{"name": "web_search", "arguments": {"query": "rust"}}"#,
            vec![c("web_search", json!({"query": "rust"}))],
        ),
        case(
            "llama python tag",
            r#"<|python_tag|>{"name": "web_search", "parameters": {"query": "x"}}"#,
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "llama text then python tag",
            r#"Searching now.<|python_tag|>{"name": "fetch_url", "parameters": {"url": "https://a.b/c"}}"#,
            vec![
                t("Searching now."),
                c("fetch_url", json!({"url": "https://a.b/c"})),
            ],
        ),
        case(
            "llama two calls with a semicolon",
            r#"{"name": "web_search", "parameters": {"query": "a"}}; {"name": "fetch_url", "parameters": {"url": "u"}}"#,
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "u"})),
            ],
        ),
        case(
            "llama semicolon without a space",
            r#"<|python_tag|>{"name": "web_search", "parameters": {"query": "a"}};{"name": "web_search", "parameters": {"query": "b"}}"#,
            vec![
                c("web_search", json!({"query": "a"})),
                c("web_search", json!({"query": "b"})),
            ],
        ),
        case(
            "llama two calls on two lines",
            "{\"name\": \"web_search\", \"parameters\": {\"query\": \"a\"}}\n{\"name\": \"read_document\", \"parameters\": {\"document_id\": \"d7\"}}",
            vec![
                c("web_search", json!({"query": "a"})),
                c("read_document", json!({"document_id": "d7"})),
            ],
        ),
        case(
            "llama calls separated by a blank line",
            "{\"name\": \"web_search\", \"parameters\": {\"query\": \"a\"}}\n\n{\"name\": \"web_search\", \"parameters\": {\"query\": \"b\"}}\n",
            vec![
                c("web_search", json!({"query": "a"})),
                c("web_search", json!({"query": "b"})),
            ],
        ),
        case(
            "llama type function with name",
            r#"{"type": "function", "name": "web_search", "parameters": {"query": "a"}}"#,
            vec![c("web_search", json!({"query": "a"}))],
        ),
        case(
            "llama type function with function",
            r#"{"type": "function", "function": {"name": "web_search", "arguments": {"query": "a"}}}"#,
            vec![c("web_search", json!({"query": "a"}))],
        ),
        case(
            "tool_calls wrapper",
            r#"{"tool_calls": [{"name": "web_search", "arguments": {"query": "a"}}, {"name": "fetch_url", "arguments": {"url": "v"}}]}"#,
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "v"})),
            ],
        ),
        case(
            "tool_calls wrapper in openai shape",
            r#"{"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "fetch_url", "arguments": "{\"url\": \"https://a.b\"}"}}]}"#,
            vec![c("fetch_url", json!({"url": "https://a.b"}))],
        ),
        case(
            "tool_calls wrapper with an unknown name is text",
            r#"{"tool_calls": [{"name": "make_coffee", "arguments": {}}]}"#,
            vec![t(
                r#"{"tool_calls": [{"name": "make_coffee", "arguments": {}}]}"#,
            )],
        ),
        case(
            "llama object with an unknown name is text",
            r#"{"name": "get_weather", "parameters": {"city": "Paris"}}"#,
            vec![t(
                r#"{"name": "get_weather", "parameters": {"city": "Paris"}}"#,
            )],
        ),
        case(
            "json object for the user with a name",
            r#"{"name": "Alice", "age": 30}"#,
            vec![t(r#"{"name": "Alice", "age": 30}"#)],
        ),
        case(
            "known name without arguments is text",
            r#"{"name": "web_search"}"#,
            vec![t(r#"{"name": "web_search"}"#)],
        ),
        case(
            "object with extra keys is text",
            r#"{"name": "web_search", "parameters": {"query": "a"}, "confidence": 0.9}"#,
            vec![t(
                r#"{"name": "web_search", "parameters": {"query": "a"}, "confidence": 0.9}"#,
            )],
        ),
        case(
            "llama text line then object",
            "I'll search.\n{\"name\": \"web_search\", \"parameters\": {\"query\": \"q\"}}",
            vec![t("I'll search."), c("web_search", json!({"query": "q"}))],
        ),
        case(
            "object in the middle of a line is text",
            r#"Call {"name": "web_search", "parameters": {"query": "q"}} now"#,
            vec![t(
                r#"Call {"name": "web_search", "parameters": {"query": "q"}} now"#,
            )],
        ),
        case(
            "object followed by words on its line is text",
            r#"{"name": "web_search", "parameters": {"query": "q"}} is how I would call it"#,
            vec![t(
                r#"{"name": "web_search", "parameters": {"query": "q"}} is how I would call it"#,
            )],
        ),
        case(
            "llama object then text on the next line",
            "{\"name\": \"web_search\", \"parameters\": {\"query\": \"q\"}}\nWaiting for results.",
            vec![
                c("web_search", json!({"query": "q"})),
                t("Waiting for results."),
            ],
        ),
        case(
            "llama parameters as a json string",
            r#"{"name": "web_search", "parameters": "{\"query\": \"q\"}"}"#,
            vec![c("web_search", json!({"query": "q"}))],
        ),
        case(
            "llama arguments as a plain string",
            r#"{"name": "fetch_url", "arguments": "https://example.com/page"}"#,
            vec![c("fetch_url", json!({"url": "https://example.com/page"}))],
        ),
        case(
            "llama indented object",
            "  {\"name\": \"web_search\", \"parameters\": {\"query\": \"indented\"}}",
            vec![c("web_search", json!({"query": "indented"}))],
        ),
        case(
            "llama object over several lines",
            "{\n  \"name\": \"web_search\",\n  \"parameters\": {\n    \"query\": \"multi\"\n  }\n}",
            vec![c("web_search", json!({"query": "multi"}))],
        ),
        case(
            "llama fenced object",
            "```json\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"fenced\"}}\n```",
            vec![c("web_search", json!({"query": "fenced"}))],
        ),
        case(
            "llama braces inside strings",
            r#"{"name": "grep_documents", "parameters": {"pattern": "}{ \" ]["}}"#,
            vec![c("grep_documents", json!({"pattern": "}{ \" ]["}))],
        ),
        case(
            "llama object cut off naming a tool",
            r#"{"name": "web_search", "parameters": {"query": "q"#,
            vec![m("unterminated json tool call")],
        ),
        case(
            "json object cut off for the user",
            r#"{"name": "Alice", "pets": ["cat"#,
            vec![t(r#"{"name": "Alice", "pets": ["cat"#)],
        ),
        case(
            "semicolon after an unknown call is text",
            r#"{"name": "nope", "parameters": {}}; done"#,
            vec![t(r#"{"name": "nope", "parameters": {}}; done"#)],
        ),
        case(
            "python tag alone disappears",
            "Here.<|python_tag|>",
            vec![t("Here.")],
        ),
        case(
            "llama object with empty parameters",
            r#"{"name": "web_search", "parameters": {}}"#,
            vec![c("web_search", json!({}))],
        ),
        case(
            "llama object with null parameters",
            r#"{"name": "web_search", "parameters": null}"#,
            vec![c("web_search", json!({}))],
        ),
    ]
}

fn hermes_variants() -> Vec<Case> {
    vec![
        case(
            "function= with json",
            r#"<function=web_search>{"query": "x"}</function>"#,
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "function name= with json",
            r#"<function name="web_search">{"query": "x"}</function>"#,
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "function name= single quoted",
            r#"<function name='fetch_url'>{"url": "u"}</function>"#,
            vec![c("fetch_url", json!({"url": "u"}))],
        ),
        case(
            "function name= with parameters",
            "<function name=\"web_search\">\n<parameter=query>\nrust\n</parameter>\n</function>",
            vec![c("web_search", json!({"query": "rust"}))],
        ),
        case(
            "function= json inside tool_call",
            "<tool_call>\n<function=web_search>{\"query\": \"inner\"}</function>\n</tool_call>",
            vec![c("web_search", json!({"query": "inner"}))],
        ),
        case(
            "function name= inside tool_call",
            "<tool_call>\n<function name=\"fetch_url\">{\"url\": \"w\"}</function>\n</tool_call>",
            vec![c("fetch_url", json!({"url": "w"}))],
        ),
        case(
            "function= json with text around",
            "Looking.\n<function=web_search>{\"query\": \"x\"}</function>\nDone.",
            vec![
                t("Looking."),
                c("web_search", json!({"query": "x"})),
                t("Done."),
            ],
        ),
        case(
            "function= invalid json",
            r#"<function=web_search>{"query": }</function>"#,
            vec![m("invalid json in function web_search")],
        ),
        case(
            "function name= unterminated",
            r#"<function name="web_search">{"query": "x"}"#,
            vec![m("unterminated function call")],
        ),
        case(
            "tools wrapper",
            r#"<tools>{"name": "web_search", "arguments": {"query": "x"}}</tools>"#,
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "tool wrapper",
            "<tool>\n{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"u\"}}\n</tool>",
            vec![c("fetch_url", json!({"url": "u"}))],
        ),
        case(
            "response wrapper",
            r#"<response>{"name": "web_search", "arguments": {"query": "x"}}</response>"#,
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "tools wrapper holding an array",
            r#"<tools>[{"name": "web_search", "arguments": {"query": "a"}}, {"name": "web_search", "arguments": {"query": "b"}}]</tools>"#,
            vec![
                c("web_search", json!({"query": "a"})),
                c("web_search", json!({"query": "b"})),
            ],
        ),
        case(
            "response holding prose is text",
            "<response>Hello there</response>",
            vec![t("<response>Hello there</response>")],
        ),
        case(
            "response holding json that is no call is text",
            r#"<response>{"answer": 42}</response>"#,
            vec![t(r#"<response>{"answer": 42}</response>"#)],
        ),
        case(
            "tools in a sentence is text",
            "Open the <tools> menu, then <tool> settings.",
            vec![t("Open the <tools> menu, then <tool> settings.")],
        ),
        case(
            "response tag at the end is text",
            "Wrap it in <response>",
            vec![t("Wrap it in <response>")],
        ),
        case(
            "tools wrapper unterminated with complete json",
            r#"<tools>{"name": "web_search", "arguments": {"query": "x"}}"#,
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "tool wrapper cut off",
            r#"<tool>{"name": "web_search", "argu"#,
            vec![m("unterminated tool_call")],
        ),
        case(
            "response wrapper cut off without a call is text",
            r#"<response>{"answer": 4"#,
            vec![t(r#"<response>{"answer": 4"#)],
        ),
        case(
            "fenced call array",
            "```json\n[{\"name\": \"web_search\", \"arguments\": {\"query\": \"f\"}}]\n```",
            vec![c("web_search", json!({"query": "f"}))],
        ),
        case(
            "fenced call inside tool_call",
            "<tool_call>\n```json\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"g\"}}\n```\n</tool_call>",
            vec![c("web_search", json!({"query": "g"}))],
        ),
        case(
            "tool_call holding a tool_calls wrapper",
            r#"<tool_call>{"tool_calls": [{"name": "web_search", "arguments": {"query": "a"}}, {"name": "fetch_url", "arguments": {"url": "b"}}]}</tool_call>"#,
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "b"})),
            ],
        ),
        case(
            "tool_call markup inside an argument stays in it",
            r#"<tool_call>{"name": "grep_documents", "arguments": {"pattern": "<tool_call>x</tool_call>"}}</tool_call>"#,
            vec![c(
                "grep_documents",
                json!({"pattern": "<tool_call>x</tool_call>"}),
            )],
        ),
        case(
            "parameter markup inside a json argument stays in it",
            r#"<tool_call>{"name": "grep_documents", "arguments": {"pattern": "<parameter=q></parameter>"}}</tool_call>"#,
            vec![c(
                "grep_documents",
                json!({"pattern": "<parameter=q></parameter>"}),
            )],
        ),
        case(
            "unrendered template name",
            "<tool_call>\n{\"name\": \"{{ tc.name }}\", \"arguments\": {}}\n</tool_call>",
            vec![m("tool name is an unrendered template")],
        ),
        case(
            "unrendered template json",
            "<tool_call>\n{\"name\": {{ tc.name | tojson }}, \"arguments\": {{ tc.arguments | tojson }}}\n</tool_call>",
            vec![m("invalid json in tool_call")],
        ),
        case(
            "unrendered template function name",
            "<function={{ tc.name }}><parameter=q>x</parameter></function>",
            vec![m("tool name is an unrendered template")],
        ),
        case(
            "unrendered template bare object is text",
            r#"{"name": "{{ tc.name }}", "parameters": {}}"#,
            vec![t(r#"{"name": "{{ tc.name }}", "parameters": {}}"#)],
        ),
    ]
}

fn pythonic() -> Vec<Case> {
    vec![
        case(
            "pythonic one call",
            r#"[web_search(query="rust async")]"#,
            vec![c("web_search", json!({"query": "rust async"}))],
        ),
        case(
            "pythonic two calls",
            r#"[web_search(query='x'), fetch_url(url="https://a.b")]"#,
            vec![
                c("web_search", json!({"query": "x"})),
                c("fetch_url", json!({"url": "https://a.b"})),
            ],
        ),
        case(
            "pythonic integer",
            r#"[search_documents(query="x", limit=5)]"#,
            vec![c("search_documents", json!({"query": "x", "limit": 5}))],
        ),
        case(
            "pythonic dict",
            r#"[search_documents(query="x", filters={'tag': 'rust', 'year': 2024})]"#,
            vec![c(
                "search_documents",
                json!({"query": "x", "filters": {"tag": "rust", "year": 2024}}),
            )],
        ),
        case(
            "pythonic True",
            r#"[grep_documents(pattern="a", case_sensitive=True)]"#,
            vec![c(
                "grep_documents",
                json!({"pattern": "a", "case_sensitive": true}),
            )],
        ),
        case(
            "pythonic False",
            r#"[grep_documents(pattern="a", case_sensitive=False)]"#,
            vec![c(
                "grep_documents",
                json!({"pattern": "a", "case_sensitive": false}),
            )],
        ),
        case(
            "pythonic None",
            r#"[web_search(query="q", count=None)]"#,
            vec![c("web_search", json!({"query": "q", "count": null}))],
        ),
        case(
            "pythonic list argument",
            r#"[grep_documents(pattern="x", paths=["a.md", 'b.md'])]"#,
            vec![c(
                "grep_documents",
                json!({"pattern": "x", "paths": ["a.md", "b.md"]}),
            )],
        ),
        case(
            "pythonic nested list and dict",
            r#"[search_documents(query="x", filters={"tags": ["a", "b"], "range": [1, 2.5]})]"#,
            vec![c(
                "search_documents",
                json!({"query": "x", "filters": {"tags": ["a", "b"], "range": [1, 2.5]}}),
            )],
        ),
        case(
            "pythonic tuple becomes a list",
            r#"[grep_documents(pattern="x", paths=("a", "b"))]"#,
            vec![c(
                "grep_documents",
                json!({"pattern": "x", "paths": ["a", "b"]}),
            )],
        ),
        case(
            "pythonic underscore in a number",
            r#"[read_document(document_id="d", offset=0, length=1_000)]"#,
            vec![c(
                "read_document",
                json!({"document_id": "d", "offset": 0, "length": 1000}),
            )],
        ),
        case(
            "pythonic negative and float",
            r#"[web_search(query="q", score=-0.5)]"#,
            vec![c("web_search", json!({"query": "q", "score": -0.5}))],
        ),
        case(
            "pythonic brackets inside a string",
            r#"[grep_documents(pattern="[a-z]+ (x) {y}")]"#,
            vec![c("grep_documents", json!({"pattern": "[a-z]+ (x) {y}"}))],
        ),
        case(
            "pythonic double quote inside single quotes",
            r#"[web_search(query='say "hi"')]"#,
            vec![c("web_search", json!({"query": "say \"hi\""}))],
        ),
        case(
            "pythonic escaped quote",
            r#"[web_search(query='it\'s')]"#,
            vec![c("web_search", json!({"query": "it's"}))],
        ),
        case(
            "pythonic escaped newline",
            r#"[web_search(query="a\nb")]"#,
            vec![c("web_search", json!({"query": "a\nb"}))],
        ),
        case(
            "pythonic over several lines",
            "[\n  web_search(query=\"a\"),\n  fetch_url(url=\"u\")\n]",
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "u"})),
            ],
        ),
        case(
            "pythonic trailing comma",
            r#"[web_search(query="x",)]"#,
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "pythonic no arguments",
            "[web_search()]",
            vec![c("web_search", json!({}))],
        ),
        case(
            "pythonic after text",
            "Let me look.\n[web_search(query=\"x\")]",
            vec![t("Let me look."), c("web_search", json!({"query": "x"}))],
        ),
        case(
            "pythonic then text",
            "[web_search(query=\"x\")]\nDone.",
            vec![c("web_search", json!({"query": "x"})), t("Done.")],
        ),
        case(
            "pythonic after python tag",
            r#"<|python_tag|>[fetch_url(url="https://a.b")]"#,
            vec![c("fetch_url", json!({"url": "https://a.b"}))],
        ),
        case(
            "pythonic after reasoning",
            "<think>I should search.</think>\n[web_search(query=\"r\")]",
            vec![c("web_search", json!({"query": "r"}))],
        ),
        case(
            "pythonic unknown name is text",
            r#"[get_weather(city="Paris", days=3)]"#,
            vec![t(r#"[get_weather(city="Paris", days=3)]"#)],
        ),
        case(
            "pythonic with one unknown name is text",
            r#"[web_search(query="x"), get_weather(city="Paris")]"#,
            vec![t(r#"[web_search(query="x"), get_weather(city="Paris")]"#)],
        ),
        case(
            "pythonic in the middle of a line is text",
            r#"Use [web_search(query="x")] to search."#,
            vec![t(r#"Use [web_search(query="x")] to search."#)],
        ),
        case(
            "pythonic with words after it is text",
            r#"[web_search(query="x")] would be my call"#,
            vec![t(r#"[web_search(query="x")] would be my call"#)],
        ),
        case(
            "positional argument is text",
            r#"[web_search("x")]"#,
            vec![t(r#"[web_search("x")]"#)],
        ),
        case(
            "pythonic cut off naming a tool",
            r#"[web_search(query="ru"#,
            vec![m("unterminated python call list")],
        ),
        case(
            "pythonic cut off not naming a tool",
            r#"[get_weather(city="Pa"#,
            vec![t(r#"[get_weather(city="Pa"#)],
        ),
        case(
            "pythonic unicode",
            r#"[web_search(query="café ☕ 東京")]"#,
            vec![c("web_search", json!({"query": "café ☕ 東京"}))],
        ),
        case(
            "pythonic triple quoted",
            "[web_search(query='''two\nlines''')]",
            vec![c("web_search", json!({"query": "two\nlines"}))],
        ),
        case(
            "pythonic json literals",
            r#"[grep_documents(pattern="x", case_sensitive=true)]"#,
            vec![c(
                "grep_documents",
                json!({"pattern": "x", "case_sensitive": true}),
            )],
        ),
    ]
}

fn typed_values() -> Vec<Case> {
    vec![
        case(
            "parameter integer",
            "<function=search_documents><parameter=query>x</parameter><parameter=limit>5</parameter></function>",
            vec![c("search_documents", json!({"query": "x", "limit": 5}))],
        ),
        case(
            "parameter integer with blanks",
            "<function=search_documents><parameter=limit> 7 \n</parameter></function>",
            vec![c("search_documents", json!({"limit": 7}))],
        ),
        case(
            "parameter string that looks like a number",
            "<function=read_document><parameter=document_id>42</parameter></function>",
            vec![c("read_document", json!({"document_id": "42"}))],
        ),
        case(
            "parameter string that looks like json",
            "<function=web_search><parameter=query>[1, 2]</parameter></function>",
            vec![c("web_search", json!({"query": "[1, 2]"}))],
        ),
        case(
            "parameter boolean in python spelling",
            "<function=grep_documents><parameter=pattern>a</parameter><parameter=case_sensitive>True</parameter></function>",
            vec![c(
                "grep_documents",
                json!({"pattern": "a", "case_sensitive": true}),
            )],
        ),
        case(
            "parameter object from a python literal",
            "<function=search_documents><parameter=filters>{'tag': 'rust'}</parameter></function>",
            vec![c("search_documents", json!({"filters": {"tag": "rust"}}))],
        ),
        case(
            "parameter object from json",
            "<function=search_documents><parameter=filters>\n{\"tag\": \"rust\", \"n\": [1]}\n</parameter></function>",
            vec![c(
                "search_documents",
                json!({"filters": {"tag": "rust", "n": [1]}}),
            )],
        ),
        case(
            "parameter null for a nullable object",
            "<function=search_documents><parameter=filters>None</parameter></function>",
            vec![c("search_documents", json!({"filters": null}))],
        ),
        case(
            "parameter null in an anyOf",
            "<function=web_search><parameter=count>null</parameter></function>",
            vec![c("web_search", json!({"count": null}))],
        ),
        case(
            "parameter integer in an anyOf",
            "<function=web_search><parameter=count>3</parameter></function>",
            vec![c("web_search", json!({"count": 3}))],
        ),
        case(
            "parameter array from a python literal",
            "<function=grep_documents><parameter=paths>['a.md', \"b.md\"]</parameter></function>",
            vec![c("grep_documents", json!({"paths": ["a.md", "b.md"]}))],
        ),
        case(
            "parameter number",
            "<function=web_search><parameter=score>0.75</parameter></function>",
            vec![c("web_search", json!({"score": 0.75}))],
        ),
        case(
            "parameter that does not convert stays a string",
            "<function=search_documents><parameter=limit>many</parameter></function>",
            vec![c("search_documents", json!({"limit": "many"}))],
        ),
        case(
            "parameter string keeps inner blanks and markup",
            "<function=grep_documents><parameter=pattern>\n  a <b> c\n</parameter></function>",
            vec![c("grep_documents", json!({"pattern": "  a <b> c"}))],
        ),
        case(
            "parameter of an unknown property is guessed",
            "<function=web_search><parameter=page>2</parameter></function>",
            vec![c("web_search", json!({"page": 2}))],
        ),
        case(
            "json string for an integer",
            r#"<tool_call>{"name": "search_documents", "arguments": {"query": "x", "limit": "10"}}</tool_call>"#,
            vec![c("search_documents", json!({"query": "x", "limit": 10}))],
        ),
        case(
            "json float for an integer",
            r#"<tool_call>{"name": "search_documents", "arguments": {"limit": 10.0}}</tool_call>"#,
            vec![c("search_documents", json!({"limit": 10}))],
        ),
        case(
            "json number for a string",
            r#"<tool_call>{"name": "read_document", "arguments": {"document_id": 42}}</tool_call>"#,
            vec![c("read_document", json!({"document_id": "42"}))],
        ),
        case(
            "json string for a boolean",
            r#"<tool_call>{"name": "grep_documents", "arguments": {"pattern": "x", "case_sensitive": "false"}}</tool_call>"#,
            vec![c(
                "grep_documents",
                json!({"pattern": "x", "case_sensitive": false}),
            )],
        ),
        case(
            "json string holding an object",
            r#"<tool_call>{"name": "search_documents", "arguments": {"filters": "{\"tag\": \"a\"}"}}</tool_call>"#,
            vec![c("search_documents", json!({"filters": {"tag": "a"}}))],
        ),
        case(
            "json string None for nullable",
            r#"<tool_call>{"name": "web_search", "arguments": {"count": "None"}}</tool_call>"#,
            vec![c("web_search", json!({"count": null}))],
        ),
        case(
            "pythonic string for an integer",
            r#"[search_documents(query="x", limit="5")]"#,
            vec![c("search_documents", json!({"query": "x", "limit": 5}))],
        ),
        case(
            "pythonic float for an integer",
            r#"[search_documents(query="x", limit=5.0)]"#,
            vec![c("search_documents", json!({"query": "x", "limit": 5}))],
        ),
        case(
            "pythonic number for a string",
            "[read_document(document_id=42)]",
            vec![c("read_document", json!({"document_id": "42"}))],
        ),
        case(
            "bare array string for an integer",
            r#"[{"name": "search_documents", "arguments": {"query": "x", "limit": "3"}}]"#,
            vec![c("search_documents", json!({"query": "x", "limit": 3}))],
        ),
        case(
            "unknown tool keeps its values",
            r#"<tool_call>{"name": "make_coffee", "arguments": {"size": "2"}}</tool_call>"#,
            vec![c("make_coffee", json!({"size": "2"}))],
        ),
        case(
            "plain string arguments without a schema to place it",
            r#"<tool_call>{"name": "make_coffee", "arguments": "large"}</tool_call>"#,
            vec![m(
                "arguments of make_coffee are a string that is not a json object",
            )],
        ),
    ]
}

fn policies() -> Vec<Case> {
    vec![
        case(
            "policy: unclosed tool_call with complete json is the call",
            "<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}",
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "policy: unclosed tool_call cut inside json is malformed",
            "Searching.\n<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"qu",
            vec![t("Searching."), m("unterminated tool_call")],
        ),
        case(
            "policy: text after the last call is shown",
            "<tool_call>{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}</tool_call>\nThe results will follow.",
            vec![
                c("web_search", json!({"query": "x"})),
                t("The results will follow."),
            ],
        ),
        case(
            "policy: text between calls is shown",
            "<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>\nand also\n<tool_call>{\"name\": \"fetch_url\", \"arguments\": {}}</tool_call>",
            vec![
                c("web_search", json!({})),
                t("and also"),
                c("fetch_url", json!({})),
            ],
        ),
        case(
            "policy: unknown name in tagged markup is a call",
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>",
            vec![c("get_weather", json!({"city": "Paris"}))],
        ),
        case(
            "policy: unknown name in function markup is a call",
            "<function=get_weather><parameter=city>Paris</parameter></function>",
            vec![c("get_weather", json!({"city": "Paris"}))],
        ),
        case(
            "policy: unknown name in a bare array is text",
            r#"[{"name": "get_weather", "arguments": {"city": "Paris"}}]"#,
            vec![t(
                r#"[{"name": "get_weather", "arguments": {"city": "Paris"}}]"#,
            )],
        ),
        case(
            "policy: unclosed function at the end is malformed",
            "<function=web_search><parameter=query>x</parameter>",
            vec![m("unterminated function call")],
        ),
    ]
}

fn prose() -> Vec<Case> {
    vec![
        case(
            "code block with an object",
            "```js\n{\n  \"a\": 1\n}\n```",
            vec![t("```js\n{\n  \"a\": 1\n}\n```")],
        ),
        case(
            "json schema for the user",
            r#"{"type": "object", "properties": {"name": {"type": "string"}}}"#,
            vec![t(
                r#"{"type": "object", "properties": {"name": {"type": "string"}}}"#,
            )],
        ),
        case(
            "task list",
            "[x] done\n[ ] todo",
            vec![t("[x] done\n[ ] todo")],
        ),
        case("list of names", "[a, b]", vec![t("[a, b]")]),
        case(
            "call with a positional number",
            "[see(1)]",
            vec![t("[see(1)]")],
        ),
        case("todo marker", "[TODO] fix this", vec![t("[TODO] fix this")]),
        case(
            "set notation at a line start",
            "{x | x > 0}\nis the set.",
            vec![t("{x | x > 0}\nis the set.")],
        ),
        case(
            "braces in the middle of a line",
            "Set {x} := 1 and {\"name\": 2}.",
            vec![t("Set {x} := 1 and {\"name\": 2}.")],
        ),
        case(
            "template placeholders in prose",
            "Fill in {{ name }} and {{ arguments }}.",
            vec![t("Fill in {{ name }} and {{ arguments }}.")],
        ),
        case(
            "markdown link list",
            "[docs](https://a.b)\n[api](https://c.d)",
            vec![t("[docs](https://a.b)\n[api](https://c.d)")],
        ),
        case(
            "python code line at a line start",
            "[x * 2 for x in xs]",
            vec![t("[x * 2 for x in xs]")],
        ),
        case(
            "function call in a sentence",
            "Call print(x) then [len(xs)] is shown.",
            vec![t("Call print(x) then [len(xs)] is shown.")],
        ),
        case(
            "bracketed citation then a call",
            "[1] Smith.\n<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>",
            vec![t("[1] Smith."), c("web_search", json!({}))],
        ),
        case(
            "tool tags quoted as inline code",
            "Use `<tools>`, `<function name=\"x\">` or `<|python_tag|>`.",
            vec![t(
                "Use `<tools>`, `<function name=\"x\">` or `<|python_tag|>`.",
            )],
        ),
        case(
            "json array of records with names",
            "[{\"name\": \"web_search\", \"calls\": 3}]",
            vec![t("[{\"name\": \"web_search\", \"calls\": 3}]")],
        ),
        case(
            "object with a known name among other keys",
            "{\"name\": \"fetch_url\", \"description\": \"fetches\"}",
            vec![t("{\"name\": \"fetch_url\", \"description\": \"fetches\"}")],
        ),
    ]
}
