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
    cases.extend(xml_values());
    cases.extend(glm());
    cases.extend(python_after_prose());
    cases.extend(llama_json_in_prose());
    cases.extend(hermes_strings_and_fences());
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
            "object in the middle of a line",
            r#"Call {"name": "web_search", "parameters": {"query": "q"}} now"#,
            vec![t("Call"), c("web_search", json!({"query": "q"})), t("now")],
        ),
        case(
            "object followed by words on its line",
            r#"{"name": "web_search", "parameters": {"query": "q"}} is how I would call it"#,
            vec![
                c("web_search", json!({"query": "q"})),
                t("is how I would call it"),
            ],
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
            r#"{"name": "list_spaces", "parameters": {}}"#,
            vec![c("list_spaces", json!({}))],
        ),
        case(
            "llama object with null parameters",
            r#"{"name": "list_spaces", "parameters": null}"#,
            vec![c("list_spaces", json!({}))],
        ),
        case(
            "llama object missing a required argument is text",
            r#"{"name": "web_search", "parameters": {}}"#,
            vec![t(r#"{"name": "web_search", "parameters": {}}"#)],
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
            "[list_spaces()]",
            vec![c("list_spaces", json!({}))],
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
            "pythonic in the middle of a line",
            r#"Use [web_search(query="x")] to search."#,
            vec![
                t("Use"),
                c("web_search", json!({"query": "x"})),
                t("to search."),
            ],
        ),
        case(
            "pythonic with words after it",
            r#"[web_search(query="x")] would be my call"#,
            vec![
                c("web_search", json!({"query": "x"})),
                t("would be my call"),
            ],
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
            "<function=grep_documents><parameter=pattern>\n  a <b>  c\n</parameter></function>",
            vec![c("grep_documents", json!({"pattern": "a <b>  c"}))],
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
            "plain string arguments without a schema to place it are passed on",
            r#"<tool_call>{"name": "make_coffee", "arguments": "large"}</tool_call>"#,
            vec![c("make_coffee", json!("large"))],
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

/// Qwen3-Coder's XML parameters as templates lay them out, and values that
/// hold call markup of their own.
fn xml_values() -> Vec<Case> {
    vec![
        case(
            "indented parameter values are trimmed at their edges",
            "<tool_call>\n  <function=web_search>\n    <parameter=query>\n      Paris weather\n    </parameter>\n    <parameter=count>\n      3\n    </parameter>\n  </function>\n</tool_call>",
            vec![c(
                "web_search",
                json!({"query": "Paris weather", "count": 3}),
            )],
        ),
        case(
            "inner blank lines of a value are kept",
            "<function=write_file>\n<parameter=path>\nnotes.md\n</parameter>\n<parameter=content>\n# Title\n\n    indented line\nlast\n</parameter>\n</function>",
            vec![c(
                "write_file",
                json!({"path": "notes.md", "content": "# Title\n\n    indented line\nlast"}),
            )],
        ),
        case(
            "a nullable parameter written as None is null",
            "<function=write_file>\n<parameter=path>\na\n</parameter>\n<parameter=content>\nb\n</parameter>\n<parameter=mode>\nNone\n</parameter>\n</function>",
            vec![c(
                "write_file",
                json!({"path": "a", "content": "b", "mode": null}),
            )],
        ),
        case(
            "a nullable object written as null is null",
            "<function=search_documents><parameter=query>x</parameter><parameter=filters>null</parameter></function>",
            vec![c(
                "search_documents",
                json!({"query": "x", "filters": null}),
            )],
        ),
        case(
            "an object written as a json string of a python repr",
            "<function=search_documents>\n<parameter=query>\nx\n</parameter>\n<parameter=filters>\n\"{'tags': ['a', 'b'], 'year': 2024, 'draft': False}\"\n</parameter>\n</function>",
            vec![c(
                "search_documents",
                json!({"query": "x", "filters": {"tags": ["a", "b"], "year": 2024, "draft": false}}),
            )],
        ),
        case(
            "an array written as a python list",
            "<function=grep_documents><parameter=pattern>TODO</parameter><parameter=paths>['src', 'docs']</parameter></function>",
            vec![c(
                "grep_documents",
                json!({"pattern": "TODO", "paths": ["src", "docs"]}),
            )],
        ),
        case(
            "a value holding a closing parameter tag in its text",
            "<tool_call>\n<function=write_file>\n<parameter=path>\nguide.md\n</parameter>\n<parameter=content>\nClose each value with </parameter> and go on.\n</parameter>\n</function>\n</tool_call>",
            vec![c(
                "write_file",
                json!({"path": "guide.md", "content": "Close each value with </parameter> and go on."}),
            )],
        ),
        case(
            "a value holding a parameter tag of an argument already given",
            "<tool_call>\n<function=write_file>\n<parameter=path>\nt.xml\n</parameter>\n<parameter=content>\n<parameter=path>\nother\n</parameter>\n</parameter>\n</function>\n</tool_call>",
            vec![c(
                "write_file",
                json!({"path": "t.xml", "content": "<parameter=path>\nother\n</parameter>"}),
            )],
        ),
        case(
            "a value holding a whole tool call",
            "<tool_call>\n<function=write_file>\n<parameter=path>\nexample.txt\n</parameter>\n<parameter=content>\nA call looks like this:\n<tool_call>\n<function=web_search>\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>\nThat is all.\n</parameter>\n</function>\n</tool_call>\nWritten.",
            vec![
                c(
                    "write_file",
                    json!({"path": "example.txt", "content": "A call looks like this:\n<tool_call>\n<function=web_search>\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>\nThat is all."}),
                ),
                t("Written."),
            ],
        ),
        case(
            "a bare function whose value holds a closing function tag",
            "<function=write_file>\n<parameter=path>\nf.md\n</parameter>\n<parameter=content>\nEnd a call with </function> on its own line.\n</parameter>\n</function>\nDone.",
            vec![
                c(
                    "write_file",
                    json!({"path": "f.md", "content": "End a call with </function> on its own line."}),
                ),
                t("Done."),
            ],
        ),
        case(
            "a wrapped call whose closing parameter tags are missing",
            "<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n<parameter=content>\nhello\n</function>\n</tool_call>",
            vec![c(
                "write_file",
                json!({"path": "a.txt", "content": "hello"}),
            )],
        ),
        case(
            "two wrapped calls, the second after text",
            "<tool_call>\n<function=web_search>\n<parameter=query>\na\n</parameter>\n</function>\n</tool_call>\nand then\n<tool_call>\n<function=fetch_url>\n<parameter=url>\nhttps://a.example\n</parameter>\n</function>\n</tool_call>",
            vec![
                c("web_search", json!({"query": "a"})),
                t("and then"),
                c("fetch_url", json!({"url": "https://a.example"})),
            ],
        ),
    ]
}

/// GLM-4.5: the name after `<tool_call>`, then key and value pairs.
fn glm() -> Vec<Case> {
    vec![
        case(
            "glm call with typed values",
            "<tool_call>search_documents\n<arg_key>query</arg_key>\n<arg_value>vacuum full</arg_value>\n<arg_key>limit</arg_key>\n<arg_value>5</arg_value>\n</tool_call>",
            vec![c(
                "search_documents",
                json!({"query": "vacuum full", "limit": 5}),
            )],
        ),
        case(
            "glm call after text and reasoning",
            "<think>The user wants the weather.</think>\nI'll search.\n<tool_call>web_search\n<arg_key>query</arg_key>\n<arg_value>weather in Paris</arg_value>\n</tool_call>",
            vec![
                t("I'll search."),
                c("web_search", json!({"query": "weather in Paris"})),
            ],
        ),
        case(
            "two glm calls",
            "<tool_call>web_search\n<arg_key>query</arg_key>\n<arg_value>a</arg_value>\n</tool_call>\n<tool_call>fetch_url\n<arg_key>url</arg_key>\n<arg_value>https://b.example</arg_value>\n</tool_call>",
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "https://b.example"})),
            ],
        ),
        case(
            "glm call without arguments",
            "<tool_call>list_spaces\n</tool_call>",
            vec![c("list_spaces", json!({}))],
        ),
        case(
            "glm json values without a schema",
            "<tool_call>make_chart\n<arg_key>series</arg_key>\n<arg_value>[1, 2, 3]</arg_value>\n<arg_key>options</arg_key>\n<arg_value>{\"log\": true}</arg_value>\n<arg_key>title</arg_key>\n<arg_value>Sales</arg_value>\n</tool_call>",
            vec![c(
                "make_chart",
                json!({"series": [1, 2, 3], "options": {"log": true}, "title": "Sales"}),
            )],
        ),
        case(
            "glm object value typed by the schema",
            "<tool_call>search_documents<arg_key>query</arg_key><arg_value>x</arg_value><arg_key>filters</arg_key><arg_value>{\"year\": 2024}</arg_value></tool_call>",
            vec![c(
                "search_documents",
                json!({"query": "x", "filters": {"year": 2024}}),
            )],
        ),
    ]
}

/// Python call lists after prose, and Llama 4's python markers.
fn python_after_prose() -> Vec<Case> {
    vec![
        case(
            "python call list after prose on its line",
            "I'll check the weather for you. [web_search(query='Paris weather', count=2)]",
            vec![
                t("I'll check the weather for you."),
                c("web_search", json!({"query": "Paris weather", "count": 2})),
            ],
        ),
        case(
            "python call list after a colon",
            "Calling the tools now: [web_search(query=\"a\"), fetch_url(url=\"https://a.example\")]",
            vec![
                t("Calling the tools now:"),
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "https://a.example"})),
            ],
        ),
        case(
            "llama 4 python markers around a call list",
            "<|python_start|>[web_search(query=\"rust\")]<|python_end|>",
            vec![c("web_search", json!({"query": "rust"}))],
        ),
        case(
            "llama 4 python markers around a call without brackets",
            "Let me look.\n<|python_start|>search_documents(query=\"vacuum\", limit=3)<|python_end|>",
            vec![
                t("Let me look."),
                c("search_documents", json!({"query": "vacuum", "limit": 3})),
            ],
        ),
        case(
            "llama 4 python markers cut off by the end of the reply",
            "<|python_start|>[fetch_url(url='https://x.example')]",
            vec![c("fetch_url", json!({"url": "https://x.example"}))],
        ),
        case(
            "index expressions in prose are text",
            "Take xs[len(xs) - 1] and d[key(x)], then [1] or [see(this)].",
            vec![t(
                "Take xs[len(xs) - 1] and d[key(x)], then [1] or [see(this)].",
            )],
        ),
        case(
            "a python call list to a tool not offered is text",
            "Try [make_coffee(size='large')] later.",
            vec![t("Try [make_coffee(size='large')] later.")],
        ),
    ]
}

/// Llama 3's JSON calls with text around them, several of them, and the
/// JSON that must stay text.
fn llama_json_in_prose() -> Vec<Case> {
    vec![
        case(
            "llama json call after prose on its line",
            r#"Sure, here is the call: {"name": "web_search", "parameters": {"query": "tokio"}}"#,
            vec![
                t("Sure, here is the call:"),
                c("web_search", json!({"query": "tokio"})),
            ],
        ),
        case(
            "llama json call with prose after it",
            "{\"name\": \"fetch_url\", \"parameters\": {\"url\": \"https://a.example\"}}\nI'll read the page once it arrives.",
            vec![
                c("fetch_url", json!({"url": "https://a.example"})),
                t("I'll read the page once it arrives."),
            ],
        ),
        case(
            "llama json calls separated by semicolons after prose",
            r#"Two lookups. {"name": "web_search", "parameters": {"query": "a"}}; {"name": "web_search", "parameters": {"query": "b"}}"#,
            vec![
                t("Two lookups."),
                c("web_search", json!({"query": "a"})),
                c("web_search", json!({"query": "b"})),
            ],
        ),
        case(
            "llama json call after a malformed first attempt",
            "{\"name\": \"web_search\", \"parameters\": {\"query\": \"a\"}\n{\"name\": \"web_search\", \"parameters\": {\"query\": \"a\"}}",
            vec![
                m("unterminated json tool call"),
                c("web_search", json!({"query": "a"})),
            ],
        ),
        case(
            "llama json call with a python tag and a stray end token",
            "<|python_tag|>{\"name\": \"web_search\", \"parameters\": {\"query\": \"x\"}}<|python_end|>",
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "array of calls without commas",
            "[{\"name\": \"web_search\", \"arguments\": {\"query\": \"a\"}}\n {\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://b.example\"}}]",
            vec![
                c("web_search", json!({"query": "a"})),
                c("fetch_url", json!({"url": "https://b.example"})),
            ],
        ),
        case(
            "array of calls after stray words",
            "Calls: [{\"name\": \"web_search\", \"arguments\": {\"query\": \"a\"}}]",
            vec![t("Calls:"), c("web_search", json!({"query": "a"}))],
        ),
        case(
            "json after prose naming a tool not offered is text",
            r#"The format is {"name": "make_coffee", "parameters": {"size": "large"}} as shown."#,
            vec![t(
                r#"The format is {"name": "make_coffee", "parameters": {"size": "large"}} as shown."#,
            )],
        ),
        case(
            "json after prose whose arguments break the schema is text",
            r#"For example {"name": "web_search", "parameters": {"q": "x"}} would fail."#,
            vec![t(
                r#"For example {"name": "web_search", "parameters": {"q": "x"}} would fail."#,
            )],
        ),
        case(
            "json with an argument of the wrong type is text",
            "{\"name\": \"read_document\", \"parameters\": {\"document_id\": \"d\", \"offset\": \"later\"}}",
            vec![t(
                "{\"name\": \"read_document\", \"parameters\": {\"document_id\": \"d\", \"offset\": \"later\"}}",
            )],
        ),
        case(
            "json with an argument a closed schema forbids is text",
            "{\"name\": \"write_file\", \"parameters\": {\"path\": \"a\", \"content\": \"b\", \"owner\": \"me\"}}",
            vec![t(
                "{\"name\": \"write_file\", \"parameters\": {\"path\": \"a\", \"content\": \"b\", \"owner\": \"me\"}}",
            )],
        ),
        case(
            "json inside a string or call in prose is text",
            r#"Set cfg = {"name": "web_search", "parameters": {"query": "x"}} or f({"name": "web_search", "parameters": {"query": "x"}})."#,
            vec![t(
                r#"Set cfg = {"name": "web_search", "parameters": {"query": "x"}} or f({"name": "web_search", "parameters": {"query": "x"}})."#,
            )],
        ),
    ]
}

/// Hermes calls whose arguments are strings, and call markup in fences.
fn hermes_strings_and_fences() -> Vec<Case> {
    vec![
        case(
            "hermes arguments as a plain string are passed on",
            r#"<tool_call>{"name": "write_file", "arguments": "notes.md"}</tool_call>"#,
            vec![c("write_file", json!("notes.md"))],
        ),
        case(
            "hermes arguments as a string that only looks like json",
            r#"<tool_call>{"name": "web_search", "arguments": "{\"query\": \"x\""}</tool_call>"#,
            vec![c("web_search", json!("{\"query\": \"x\""))],
        ),
        case(
            "function_call wrapper",
            r#"<function_call>{"name": "web_search", "arguments": {"query": "x"}}</function_call>"#,
            vec![c("web_search", json!({"query": "x"}))],
        ),
        case(
            "function_call wrapper inside a code fence",
            "Here it is:\n```\n<function_call>{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}</function_call>\n```\nWaiting for results.",
            vec![
                t("Here it is:"),
                c("web_search", json!({"query": "x"})),
                t("Waiting for results."),
            ],
        ),
        case(
            "tool_call inside an xml fence",
            "```xml\n<tool_call>\n{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://a.example\"}}\n</tool_call>\n```",
            vec![c("fetch_url", json!({"url": "https://a.example"}))],
        ),
        case(
            "a fence holding html stays text",
            "```html\n<div>hi</div>\n```",
            vec![t("```html\n<div>hi</div>\n```")],
        ),
    ]
}
