//! The registry pipeline through the real handlers and the PostgreSQL ledger:
//! definitions and handlers one to one, start-up errors that name the files,
//! argument types that agree with their definitions, names and aliases,
//! validation, permission, availability, rate limits shared by replicas,
//! timeouts, panics, and the audit record.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::World;
use data_plane_handlers::{LedgerOptions, PgLedger};
use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, DefinitionFile, ErrorCode, HandlerEntry,
    NoCallbacks, NoLedger, Permission, RateLimits, Registry, Settings, TagSpec, ToolContext,
    ToolError, ToolHandler, ToolMeta, ToolResult,
};
use data_plane_store::Scope;
use serde_json::{Value, json};
use uuid::Uuid;

const TOOLS: [&str; 12] = [
    "analyze_document",
    "document_info",
    "fetch_web_page",
    "find_by_name",
    "folder_tree",
    "grep_documents",
    "list_folder_contents",
    "list_sources",
    "query_documents",
    "read_document",
    "search_documents",
    "web_search",
];

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[tokio::test]
async fn every_definition_has_its_handler_and_the_other_way_round() {
    let w = World::new().await;
    // What the build embedded is what definitions/ holds now.
    let mut on_disk: Vec<String> = Vec::new();
    for folder in ["definitions", "definitions/agents"] {
        let mut files: Vec<String> = std::fs::read_dir(repo_root().join(folder))
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| format!("{folder}/{}", e.file_name().to_string_lossy()))
            .collect();
        files.sort();
        on_disk.extend(files);
    }
    let embedded: Vec<String> = data_plane_handlers::definitions()
        .into_iter()
        .map(|d| d.file)
        .collect();
    assert_eq!(embedded, on_disk);

    let handlers: Vec<&str> = data_plane_handlers::all(Some(&w.deps))
        .iter()
        .map(|h| h.name)
        .collect();
    assert_eq!(
        handlers, TOOLS,
        "handlers::all() lists every tool, alphabetically"
    );

    let tools = w.registry.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, TOOLS);
    for t in tools {
        assert_eq!(t.definition_file, format!("definitions/{}.json", t.name));
        assert_eq!(t.handler_file, format!("handlers/src/{}.rs", t.name));
        assert!(
            repo_root().join(t.handler_file).is_file(),
            "{}",
            t.handler_file
        );
        assert_eq!(t.definition["name"], t.name.as_str());
        assert_eq!(t.openai_tool()["type"], "function");
    }
}

#[test]
fn the_single_argument_tools_have_tags_and_the_prompt_block_teaches_them() {
    let registry = data_plane_handlers::offline_registry().unwrap();
    let tags: Vec<(&str, &str)> = registry
        .local_tools()
        .iter()
        .filter_map(|t| t.tag.as_ref().map(|tag| (t.name.as_str(), tag.prefix())))
        .collect();
    assert_eq!(
        tags,
        [
            ("fetch_web_page", "FETCH"),
            ("find_by_name", "FIND"),
            ("grep_documents", "GREP"),
            ("read_document", "READ"),
            ("search_documents", "SEARCH"),
            ("web_search", "WEB"),
        ]
    );
    // A guest without web search: the four tools over documents.
    let ctx = ToolContext::new(uuid::Uuid::new_v4(), None, Permission::Guest);
    let block = registry.prompt_block(&ctx);
    let forms: Vec<&str> = block
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(
        forms,
        [
            "FIND: <pattern> — documents whose path or name matches a glob — e.g. FIND: **/*.csv",
            "GREP: <pattern> — exact text or regex matches with line numbers — e.g. GREP: max_connections",
            "READ: <document_id> — document text by character range — e.g. READ: 3f2b8c4e-9a1d-4e7b-8c2f-5d6e7f8a9b0c",
            "SEARCH: <query> — hybrid, vector or keyword search over passages — e.g. SEARCH: vacuum full",
        ],
        "{block}"
    );
    assert!(block.contains("one call per line, at the start of the line"));
    // A profile without tagged tools offers no block.
    let navigation = ctx.with_allow_list(
        "test",
        std::sync::Arc::from(vec!["folder_tree".to_string()]),
    );
    assert_eq!(registry.prompt_block(&navigation), "");
}

/// A handler for registries built by hand in these tests.
struct Scripted(Behaviour);

#[derive(Clone, Copy)]
enum Behaviour {
    Echo,
    Sleep(Duration),
    Panic,
}

#[async_trait]
impl ToolHandler for Scripted {
    async fn call(
        &self,
        args: Value,
        _ctx: &ToolContext,
        _callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        match self.0 {
            Behaviour::Echo => Ok(json!({ "echo": args })),
            Behaviour::Sleep(d) => {
                tokio::time::sleep(d).await;
                Ok(json!({ "slept": true }))
            }
            Behaviour::Panic => panic!("a bug in a handler"),
        }
    }
}

fn meta(timeout: Duration, limits: RateLimits, aliases: &'static [&'static str]) -> ToolMeta {
    ToolMeta {
        category: Category::Document,
        short_description: "a tool of the registry tests",
        available_when: "always",
        aliases,
        annotations: AnnotationHints::DERIVED,
        cost: CostTier::Cheap,
        permission: Permission::Guest,
        timeout,
        limits,
        requires_gate: false,
        defer_loading: false,
        tag: None,
    }
}

fn handler(name: &'static str, file: &'static str, behaviour: Behaviour) -> HandlerEntry {
    handler_with(
        name,
        file,
        behaviour,
        meta(Duration::from_secs(5), RateLimits::NONE, &[]),
    )
}

fn handler_with(
    name: &'static str,
    file: &'static str,
    behaviour: Behaviour,
    meta: ToolMeta,
) -> HandlerEntry {
    HandlerEntry {
        name,
        file,
        meta,
        available: |_| true,
        shape: None,
        asks: None,
        handler: Arc::new(Scripted(behaviour)),
        args_schema: json!({}),
        output_schema: None,
    }
}

/// A valid definition of `name` with one optional string parameter.
fn definition_value(name: &str) -> Value {
    json!({
        "name": name,
        "description": format!("The {name} tool of the registry tests."),
        "parameters": {
            "type": "object",
            "properties": {
                "text": { "type": "string", "description": "Anything." }
            },
            "additionalProperties": false
        }
    })
}

fn definition(file: &str, value: &Value) -> DefinitionFile {
    DefinitionFile {
        file: file.to_string(),
        text: value.to_string(),
    }
}

fn valid(name: &str) -> DefinitionFile {
    definition(&format!("definitions/{name}.json"), &definition_value(name))
}

/// `valid(name)` changed by `edit`.
fn edited(name: &str, edit: impl FnOnce(&mut Value)) -> DefinitionFile {
    let mut value = definition_value(name);
    edit(&mut value);
    definition(&format!("definitions/{name}.json"), &value)
}

#[test]
fn an_inconsistent_registry_names_the_files() {
    let check = |case: &str,
                 definitions: Vec<DefinitionFile>,
                 handlers: Vec<HandlerEntry>,
                 expected: &[&str]| {
        let err = Registry::build(definitions, handlers, Arc::new(NoLedger))
            .err()
            .unwrap_or_else(|| panic!("{case}: the registry was built"));
        let message = err.to_string();
        assert_eq!(
            err.problems.len(),
            expected.len(),
            "{case}: {:#?}",
            err.problems
        );
        for (problem, fragment) in err.problems.iter().zip(expected) {
            assert!(
                problem.contains(fragment),
                "{case}: {problem:?} lacks {fragment:?}"
            );
            assert!(message.contains(problem.as_str()));
        }
    };
    let echo = |name: &'static str, file: &'static str| handler(name, file, Behaviour::Echo);
    let a = || echo("alpha", "handlers/src/alpha.rs");

    check(
        "handler without definition",
        vec![valid("alpha")],
        vec![a(), echo("beta", "handlers/src/beta.rs")],
        &["handler handlers/src/beta.rs has no definition (expected definitions/beta.json)"],
    );
    check(
        "definition without handler",
        vec![valid("alpha"), valid("beta")],
        vec![a()],
        &["definition definitions/beta.json has no handler (expected handlers/src/beta.rs"],
    );
    check(
        "two handlers, one name",
        vec![valid("alpha")],
        vec![a(), echo("alpha", "handlers/src/alpha_again.rs")],
        &[
            "two handlers name the tool alpha: handlers/src/alpha.rs and handlers/src/alpha_again.rs",
        ],
    );
    check(
        "two definitions, one name",
        vec![
            valid("alpha"),
            definition("extra/alpha.json", &definition_value("alpha")),
        ],
        vec![a()],
        &["two definitions name the tool alpha: definitions/alpha.json and extra/alpha.json"],
    );
    check(
        "an alias that is another tool's name",
        vec![valid("alpha"), valid("beta")],
        vec![
            a(),
            handler_with(
                "beta",
                "handlers/src/beta.rs",
                Behaviour::Echo,
                meta(Duration::from_secs(1), RateLimits::NONE, &["alpha"]),
            ),
        ],
        &["alias \"alpha\" of beta (handlers/src/beta.rs) clashes with alpha"],
    );

    // An invalid definition: its own problem, and its handler told why it
    // has no usable definition.
    let usable =
        "handler handlers/src/alpha.rs has no usable definition: definitions/alpha.json is invalid";
    let invalid: Vec<(&str, DefinitionFile, &str)> = vec![
        (
            "not JSON",
            DefinitionFile {
                file: "definitions/alpha.json".into(),
                text: "{ \"name\": ".into(),
            },
            "definitions/alpha.json: not valid JSON",
        ),
        (
            "bad JSON Schema",
            edited("alpha", |v| {
                v["parameters"]["properties"]["text"]["type"] = json!("strng")
            }),
            "definitions/alpha.json: \"parameters\" is not valid JSON Schema",
        ),
        (
            "no description",
            edited("alpha", |v| {
                v.as_object_mut().unwrap().remove("description");
            }),
            "definitions/alpha.json: \"description\" must be a non-empty string",
        ),
        (
            "blank description",
            edited("alpha", |v| v["description"] = json!("  ")),
            "definitions/alpha.json: \"description\" must be a non-empty string",
        ),
        (
            "a parameter without description",
            edited("alpha", |v| {
                v["parameters"]["properties"]["text"]
                    .as_object_mut()
                    .unwrap()
                    .remove("description");
            }),
            "definitions/alpha.json: parameter \"text\" has no description",
        ),
        (
            "additionalProperties left out",
            edited("alpha", |v| {
                v["parameters"]
                    .as_object_mut()
                    .unwrap()
                    .remove("additionalProperties");
            }),
            "definitions/alpha.json: \"parameters.additionalProperties\" must be false",
        ),
        (
            "additionalProperties true",
            edited("alpha", |v| {
                v["parameters"]["additionalProperties"] = json!(true)
            }),
            "definitions/alpha.json: \"parameters.additionalProperties\" must be false",
        ),
        (
            "required parameter that does not exist",
            edited("alpha", |v| v["parameters"]["required"] = json!(["txt"])),
            "definitions/alpha.json: required parameter \"txt\" is not among the properties",
        ),
        (
            "unknown key",
            edited("alpha", |v| v["params"] = json!({})),
            "definitions/alpha.json: unknown key \"params\"",
        ),
        (
            "file named after another tool",
            definition("definitions/alpha.json", &definition_value("gamma")),
            "definitions/alpha.json: the file must be named after its tool (gamma.json)",
        ),
    ];
    for (case, def, problem) in invalid {
        check(case, vec![def], vec![a()], &[problem, usable]);
    }

    // Tags: checked against the definition, prefixes unique.
    let tagged = |name: &'static str, file: &'static str, tag: TagSpec| {
        let mut meta = meta(Duration::from_secs(1), RateLimits::NONE, &[]);
        meta.tag = Some(tag);
        handler_with(name, file, Behaviour::Echo, meta)
    };
    let tag = |tag_prefix: &'static str, pattern: &'static str, example: &'static str| TagSpec {
        tag_prefix,
        pattern,
        example,
        strip_from_display: true,
    };
    check(
        "a tag group that is no parameter",
        vec![valid("alpha")],
        vec![tagged(
            "alpha",
            "handlers/src/alpha.rs",
            tag("ALPHA", "(?P<txt>.+)", "ALPHA: x"),
        )],
        &[
            "handlers/src/alpha.rs: the pattern of tag ALPHA has the group \"txt\", which is not a parameter of the tool",
        ],
    );
    check(
        "a lower-case tag prefix",
        vec![valid("alpha")],
        vec![tagged(
            "alpha",
            "handlers/src/alpha.rs",
            tag("alpha", "(?P<text>.+)", "alpha: x"),
        )],
        &[
            "handlers/src/alpha.rs: tag prefix \"alpha\" must be upper-case ASCII letters or underscores",
        ],
    );
    check(
        "a required parameter without a group",
        vec![edited("alpha", |v| {
            v["parameters"]["required"] = json!(["text"])
        })],
        vec![tagged(
            "alpha",
            "handlers/src/alpha.rs",
            tag("ALPHA", "(?:.+)", "ALPHA: x"),
        )],
        &[
            "handlers/src/alpha.rs: the pattern of tag ALPHA has no group for the required parameter \"text\"",
        ],
    );
    check(
        "a pattern that does not compile",
        vec![valid("alpha")],
        vec![tagged(
            "alpha",
            "handlers/src/alpha.rs",
            tag("ALPHA", "(?P<text>.+", "ALPHA: x"),
        )],
        &["handlers/src/alpha.rs: the pattern of tag ALPHA does not compile"],
    );
    check(
        "two tools, one tag prefix",
        vec![valid("alpha"), valid("beta")],
        vec![
            tagged(
                "alpha",
                "handlers/src/alpha.rs",
                tag("FIND", "(?P<text>.+)", "FIND: x"),
            ),
            tagged(
                "beta",
                "handlers/src/beta.rs",
                tag("FIND", "(?P<text>.+)", "FIND: y"),
            ),
        ],
        &[
            "handlers/src/beta.rs: tag prefix FIND is already the tag of alpha (handlers/src/alpha.rs)",
        ],
    );

    // Every problem at once, each named.
    check(
        "everything wrong",
        vec![
            edited("alpha", |v| v["description"] = json!("")),
            valid("beta"),
        ],
        vec![a(), echo("gamma", "handlers/src/gamma.rs")],
        &[
            "definitions/alpha.json: \"description\"",
            usable,
            "handler handlers/src/gamma.rs has no definition",
            "definition definitions/beta.json has no handler",
        ],
    );
}

/// What a property schema accepts, reduced to what the comparison needs.
#[derive(Debug, Default)]
struct Accepts {
    types: BTreeSet<String>,
    format: Option<String>,
    enumeration: Option<BTreeSet<String>>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    items: Option<Box<Accepts>>,
}

/// Follows `$ref`s into `$defs`, and `anyOf`/`oneOf` alternatives (null for
/// an Option, one `const` per variant for a documented enum).
fn accepts(schema: &Value, root: &Value) -> Accepts {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap();
        return accepts(&root["$defs"][name], root);
    }
    let mut out = Accepts::default();
    if let Some(alternatives) = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)
    {
        for alt in alternatives {
            let a = accepts(alt, root);
            out.types.extend(a.types);
            out.format = out.format.or(a.format);
            out.minimum = out.minimum.or(a.minimum);
            out.maximum = out.maximum.or(a.maximum);
            out.items = out.items.or(a.items);
            if let Some(values) = a.enumeration {
                out.enumeration.get_or_insert_default().extend(values);
            }
        }
    }
    match schema.get("type") {
        Some(Value::String(t)) => {
            out.types.insert(t.clone());
        }
        Some(Value::Array(ts)) => {
            out.types
                .extend(ts.iter().map(|t| t.as_str().unwrap().to_string()));
        }
        _ => {}
    }
    out.types.remove("null");
    if let Some(f) = schema.get("format").and_then(Value::as_str) {
        out.format = Some(f.to_string());
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        out.enumeration
            .get_or_insert_default()
            .extend(values.iter().map(|v| v.as_str().unwrap_or("?").to_string()));
    }
    if let Some(c) = schema.get("const") {
        out.enumeration
            .get_or_insert_default()
            .insert(c.as_str().unwrap_or("?").to_string());
    }
    out.minimum = out
        .minimum
        .or_else(|| schema.get("minimum").and_then(Value::as_f64));
    out.maximum = out
        .maximum
        .or_else(|| schema.get("maximum").and_then(Value::as_f64));
    if let Some(items) = schema.get("items") {
        out.items = Some(Box::new(accepts(items, root)));
    }
    out
}

/// Where a value the definition lets through would fail to parse into the
/// handler's type (or the two describe different things).
fn disagreements(at: &str, def: &Accepts, rs: &Accepts) -> Vec<String> {
    let mut out = Vec::new();
    let fits = |t: &str| rs.types.contains(t) || (t == "integer" && rs.types.contains("number"));
    if def.types.is_empty() || !def.types.iter().all(|t| fits(t)) {
        out.push(format!(
            "{at}: the definition allows {:?}, the handler's type {:?}",
            def.types, rs.types
        ));
    }
    let uuid = |a: &Accepts| a.format.as_deref() == Some("uuid");
    if uuid(def) != uuid(rs) {
        out.push(format!(
            "{at}: format uuid in the definition {} but in the handler's type {}",
            uuid(def),
            uuid(rs)
        ));
    }
    if let Some(allowed) = &rs.enumeration {
        match &def.enumeration {
            Some(values) if values.is_subset(allowed) => {}
            other => out.push(format!(
                "{at}: the handler accepts only {allowed:?}, the definition {other:?}"
            )),
        }
    }
    if let Some(min) = rs.minimum
        && def.minimum.is_none_or(|d| d < min)
    {
        out.push(format!(
            "{at}: the handler's type needs at least {min}, the definition allows {:?}",
            def.minimum
        ));
    }
    if let Some(max) = rs.maximum
        && def.maximum.is_none_or(|d| d > max)
    {
        out.push(format!(
            "{at}: the handler's type allows at most {max}, the definition {:?}",
            def.maximum
        ));
    }
    if let (Some(d), Some(r)) = (&def.items, &rs.items) {
        out.extend(disagreements(&format!("{at}[]"), d, r));
    }
    out
}

fn property_names(schema: &Value) -> BTreeSet<String> {
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn required(schema: &Value) -> BTreeSet<String> {
    schema["required"]
        .as_array()
        .map(|r| r.iter().map(|n| n.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn handler_argument_types_agree_with_their_definitions() {
    let w = World::new().await;
    let mut problems = Vec::new();
    for t in w.registry.tools() {
        let def = &t.definition["parameters"];
        let rs = &t.args_schema;
        let name = &t.name;
        if property_names(def) != property_names(rs) {
            problems.push(format!(
                "{name}: parameters {:?} in the definition, {:?} in the handler's Args",
                property_names(def),
                property_names(rs)
            ));
            continue;
        }
        if required(def) != required(rs) {
            problems.push(format!(
                "{name}: required {:?} in the definition, {:?} in the handler's Args",
                required(def),
                required(rs)
            ));
        }
        if t.output_schema.is_none() {
            problems.push(format!(
                "{name}: no output schema (handlers::entry! makes it from the handler's Output)"
            ));
        }
        if rs.get("additionalProperties") != Some(&json!(false)) {
            problems.push(format!(
                "{name}: Args should refuse unknown fields (#[serde(deny_unknown_fields)])"
            ));
        }
        for prop in property_names(def) {
            let d = accepts(&def["properties"][&prop], def);
            let r = accepts(&rs["properties"][&prop], rs);
            problems.extend(disagreements(&format!("{name}.{prop}"), &d, &r));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_comparison_catches_what_it_should() {
    // (definition property, handler property, whether they disagree)
    let cases = [
        (json!({"type": "string"}), json!({"type": "string"}), false),
        (
            json!({"type": "integer", "minimum": 0}),
            json!({"type": ["integer", "null"], "format": "uint64", "minimum": 0}),
            false,
        ),
        (
            json!({"type": "integer"}),
            json!({"type": "integer", "format": "uint64", "minimum": 0}),
            true,
        ),
        (
            json!({"type": "integer", "minimum": 1}),
            json!({"type": "number"}),
            false,
        ),
        (json!({"type": "number"}), json!({"type": "integer"}), true),
        (
            json!({"type": "string", "format": "uuid"}),
            json!({"type": "string"}),
            true,
        ),
        (
            json!({"type": "string"}),
            json!({"type": "string", "format": "uuid"}),
            true,
        ),
        (
            json!({"type": "string", "enum": ["a", "b"]}),
            json!({"type": "string"}),
            false,
        ),
        (
            json!({"type": "string", "enum": ["a", "b"]}),
            json!({"$ref": "#/$defs/Mode"}),
            false,
        ),
        (
            json!({"type": "string", "enum": ["a", "c"]}),
            json!({"$ref": "#/$defs/Mode"}),
            true,
        ),
        (
            json!({"type": "string"}),
            json!({"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}]}),
            true,
        ),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "array", "items": {"type": "integer"}}),
            true,
        ),
        (
            json!({"type": "boolean"}),
            json!({"type": ["boolean", "null"]}),
            false,
        ),
    ];
    let root = json!({ "$defs": { "Mode": { "oneOf": [
        { "type": "string", "const": "a" },
        { "type": "string", "const": "b" }
    ] } } });
    for (def, rs, disagree) in cases {
        let found = disagreements("p", &accepts(&def, &json!({})), &accepts(&rs, &root));
        assert_eq!(!found.is_empty(), disagree, "{def} vs {rs}: {found:?}");
    }
}

#[tokio::test]
async fn unknown_names_get_close_suggestions_and_aliases_resolve() {
    let w = World::new().await;
    let in_alpha = w.ctx(w.alice, Some(w.alpha));
    let nowhere = w.ctx(w.alice, None);
    // (name, context, what the message says, what it must not say)
    let cases: &[(&str, &ToolContext, &[&str], &[&str])] = &[
        (
            "search_document",
            &in_alpha,
            &[
                "unknown tool \"search_document\"",
                "did you mean \"search_documents\"",
            ],
            &[],
        ),
        (
            "grep_document",
            &in_alpha,
            &["did you mean \"grep_documents\""],
            &[],
        ),
        (
            "Read_Document",
            &in_alpha,
            &["did you mean \"read_document\""],
            &[],
        ),
        (
            "list_source",
            &in_alpha,
            &["did you mean \"list_sources\""],
            &[],
        ),
        (
            "xyzzy",
            &in_alpha,
            &["unknown tool \"xyzzy\"; available tools: analyze_document, document_info"],
            &["did you mean", "web_search"],
        ),
        // Only tools this context offers are suggested.
        (
            "list_source",
            &nowhere,
            &["unknown tool"],
            &["list_sources"],
        ),
    ];
    for (name, ctx, says, never) in cases {
        let r = w.call(name, json!({}), ctx).await;
        assert_eq!(r.code(), Some(ErrorCode::UnknownTool), "{name}: {r:?}");
        assert_eq!(r.tool, *name);
        let message = r.error.unwrap().message;
        for s in *says {
            assert!(message.contains(s), "{name}: {message:?} lacks {s:?}");
        }
        for s in *never {
            assert!(!message.contains(s), "{name}: {message:?} shows {s:?}");
        }
        // An alias that looks close names its tool once.
        assert_eq!(
            message.matches("\"search_documents\"").count(),
            usize::from(*name == "search_document"),
            "{message}"
        );
    }

    let vacuum = w.doc("alpha/guides/vacuum.md");
    // (alias, arguments, the tool that runs)
    let aliases = [
        ("grep", json!({ "pattern": "VACUUM" }), "grep_documents"),
        (
            "ls",
            json!({ "source_id": w.alpha_source }),
            "list_folder_contents",
        ),
        (
            "tree",
            json!({ "source_id": w.alpha_source }),
            "folder_tree",
        ),
        ("stat", json!({ "document_id": vacuum }), "document_info"),
        ("cat", json!({ "document_id": vacuum }), "read_document"),
        ("sources", json!({}), "list_sources"),
    ];
    for (alias, args, tool) in aliases {
        let r = w.call(alias, args, &in_alpha).await;
        assert_eq!(r.tool, tool, "{alias}: {r:?}");
        assert_ne!(r.code(), Some(ErrorCode::UnknownTool), "{alias}: {r:?}");
        assert_ne!(
            r.code(),
            Some(ErrorCode::InvalidArguments),
            "{alias}: {r:?}"
        );
    }
    let ls = w
        .ok("ls", json!({ "source_id": w.alpha_source }), &in_alpha)
        .await;
    assert_eq!(ls["total_folders"], 4);
}

#[tokio::test]
async fn invalid_arguments_name_every_violation() {
    let w = World::new().await;
    let ctx = w.ctx(w.alice, Some(w.alpha));
    let id = w.doc("alpha/guides/vacuum.md");
    // (tool, arguments, every fragment the message must hold)
    let cases: &[(&str, Value, &[&str])] = &[
        (
            "read_document",
            json!({ "document_id": "not-a-uuid", "max_length": 0 }),
            &[
                "invalid arguments for read_document",
                "/document_id",
                "uuid",
                "/max_length",
                "minimum",
            ],
        ),
        (
            "document_info",
            json!({}),
            &["\"document_id\" is a required property"],
        ),
        (
            "document_info",
            json!({ "document_id": id, "documentid": id }),
            &["documentid"],
        ),
        (
            "list_folder_contents",
            json!({ "source_id": w.alpha_source, "limit": "ten", "offset": -1 }),
            &["/limit", "\"ten\"", "/offset", "-1"],
        ),
        (
            "search_documents",
            json!({ "query": "", "mode": "fuzzy" }),
            &["/query", "/mode", "fuzzy"],
        ),
        (
            "read_document",
            json!("vacuum.md"),
            &["\"vacuum.md\"", "object"],
        ),
    ];
    for (tool, args, says) in cases {
        let r = w.call(tool, args.clone(), &ctx).await;
        assert_eq!(
            r.code(),
            Some(ErrorCode::InvalidArguments),
            "{tool} {args}: {r:?}"
        );
        assert!(!r.error.as_ref().unwrap().retryable);
        let message = r.error.unwrap().message;
        for s in *says {
            assert!(
                message.contains(s),
                "{tool} {args}: {message:?} lacks {s:?}"
            );
        }
    }
    // Null arguments are no arguments.
    let r = w.call("list_sources", Value::Null, &ctx).await;
    assert!(r.success, "{r:?}");
}

fn offered(w: &World, ctx: &ToolContext) -> Vec<String> {
    w.registry
        .get_available_tools(ctx)
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_guest_cannot_call_user_level_tools() {
    let w = World::new().await;
    let settings = Arc::new(Settings {
        web_search_enabled: true,
        fetch_web_page_enabled: true,
        ..Settings::default()
    });
    let guest =
        ToolContext::new(w.alice, Some(w.alpha), Permission::Guest).with_settings(settings.clone());
    let user = ToolContext::new(w.alice, Some(w.alpha), Permission::User).with_settings(settings);
    let id = w.doc("alpha/guides/vacuum.md");
    let seen = offered(&w, &guest);
    for (tool, args) in [
        ("web_search", json!({ "query": "vacuum" })),
        (
            "analyze_document",
            json!({ "document_id": id, "question": "why?" }),
        ),
        ("fetch_web_page", json!({ "url": "http://127.0.0.1/" })),
    ] {
        assert!(
            !seen.contains(&tool.to_string()),
            "{tool} offered to a guest"
        );
        assert!(offered(&w, &user).contains(&tool.to_string()), "{tool}");
        let r = w.call(tool, args.clone(), &guest).await;
        assert_eq!(r.code(), Some(ErrorCode::PermissionDenied), "{tool}: {r:?}");
        let message = r.error.unwrap().message;
        assert!(
            message.contains(tool) && message.contains("user") && message.contains("guest"),
            "{message}"
        );
        // A user passes the permission check (the handler may still fail).
        let r = w.call(tool, args, &user).await;
        assert_ne!(r.code(), Some(ErrorCode::PermissionDenied), "{tool}: {r:?}");
    }
    // Guests keep the reading tools.
    let doc = w
        .ok("document_info", json!({ "document_id": id }), &guest)
        .await;
    assert_eq!(doc["title"], "Routine Vacuuming");
    assert!(seen.contains(&"list_folder_contents".to_string()));
}

#[tokio::test]
async fn settings_and_the_space_decide_what_is_offered() {
    let w = World::new().await;
    let all: BTreeSet<&str> = TOOLS.into_iter().collect();
    let without = |gone: &[&str]| -> BTreeSet<String> {
        all.iter()
            .filter(|t| !gone.contains(t))
            .map(|t| t.to_string())
            .collect()
    };
    let navigation = ["list_sources", "list_folder_contents", "folder_tree"];
    // (web search on, fetch on, space, tools not offered)
    let cases: &[(bool, bool, bool, &[&str])] = &[
        (false, true, true, &["web_search"]),
        (true, true, true, &[]),
        (true, false, true, &["fetch_web_page"]),
        (false, false, true, &["web_search", "fetch_web_page"]),
        (true, true, false, &navigation),
        (
            false,
            true,
            false,
            &[
                "web_search",
                "list_sources",
                "list_folder_contents",
                "folder_tree",
            ],
        ),
    ];
    for (web, fetch, space, gone) in cases {
        let ctx = w
            .ctx(w.alice, space.then_some(w.alpha))
            .with_settings(Arc::new(Settings {
                web_search_enabled: *web,
                fetch_web_page_enabled: *fetch,
                ..Settings::default()
            }));
        let seen: BTreeSet<String> = offered(&w, &ctx).into_iter().collect();
        assert_eq!(
            seen,
            without(gone),
            "web {web}, fetch {fetch}, space {space}"
        );
        // A tool not offered is refused with the reason, not run.
        for tool in *gone {
            let r = w.call(tool, json!({}), &ctx).await;
            assert_eq!(r.code(), Some(ErrorCode::NotAvailable), "{tool}: {r:?}");
            assert!(r.error.unwrap().message.contains("is offered only when"));
        }
    }
}

/// An audit record the database refuses on every retry is spooled to disk,
/// not lost; a replay while the database still refuses keeps it, and once
/// the database takes it again it is written, once, and leaves the spool.
#[tokio::test]
async fn an_audit_record_refused_on_every_retry_is_spooled_then_written() {
    use data_plane_registry::{AuditRecord, Ledger};
    let w = World::new().await;
    let spool = tempfile::tempdir().unwrap();
    let ledger = PgLedger::start_with(
        w.test.db.clone(),
        LedgerOptions {
            retry_after: vec![Duration::from_millis(1); 2],
            spool_dir: Some(spool.path().to_path_buf()),
            replay_every: Duration::from_secs(3600),
        },
    );
    let spooled_lines = || match std::fs::read_to_string(spool.path().join("records.jsonl")) {
        Ok(text) => text.lines().map(str::to_string).collect::<Vec<_>>(),
        Err(_) => Vec::new(),
    };
    let rows = async || -> i64 {
        let mut tx = w.test.db.begin(Scope::System).await.unwrap();
        sqlx::query_scalar("SELECT count(*) FROM tool_calls WHERE call_id = 'call-spooled'")
            .fetch_one(&mut *tx)
            .await
            .unwrap()
    };
    let app_role: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(w.test.db.pool())
        .await
        .unwrap();
    let set_insert = async |grant: bool| {
        let sql = if grant {
            format!("GRANT INSERT ON tool_calls TO {app_role}")
        } else {
            format!("REVOKE INSERT ON tool_calls FROM {app_role}")
        };
        sqlx::query(&sql).execute(&w.test.owner).await.unwrap();
    };

    set_insert(false).await;
    ledger
        .record(AuditRecord {
            tool: "list_sources".into(),
            call_id: "call-spooled".into(),
            duration_ms: 4,
            ts: chrono::Utc::now(),
            user_id: w.alice,
            space_id: Some(w.alpha),
            request_id: "req-spooled".into(),
            parent_call_id: None,
            success: true,
            error: None,
            args: json!({"q": "kept"}),
            annotations: None,
            side_effects: Vec::new(),
            gate: None,
            agent: None,
            module: None,
            attempts: 1,
        })
        .await
        .unwrap();
    ledger.flush().await;
    assert_eq!(ledger.audit_records_spooled(), 1);
    assert!(
        ledger.audit_write_failures() >= 3,
        "the first try and two retries failed"
    );
    let lines = spooled_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("call-spooled"), "{}", lines[0]);
    assert_eq!(rows().await, 0);

    // Still refused: the record stays where it is.
    ledger.replay().await;
    assert_eq!(ledger.audit_records_replayed(), 0);
    assert_eq!(spooled_lines(), lines);

    set_insert(true).await;
    ledger.replay().await;
    assert_eq!(ledger.audit_records_replayed(), 1);
    assert!(spooled_lines().is_empty());
    assert_eq!(rows().await, 1);
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let (space, args): (Option<Uuid>, Value) =
        sqlx::query_as("SELECT space_id, args FROM tool_calls WHERE call_id = 'call-spooled'")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    assert_eq!((space, args), (Some(w.alpha), json!({"q": "kept"})));
    drop(tx);

    // A replay repeated (a crash between the write and the spool's rewrite)
    // writes nothing twice.
    std::fs::write(
        spool.path().join("records.jsonl"),
        format!("{}\n", lines[0]),
    )
    .unwrap();
    ledger.replay().await;
    assert!(spooled_lines().is_empty());
    assert_eq!(rows().await, 1);
}

/// Two "replicas": registries of their own over one database.
fn replica(w: &World, handlers: Vec<HandlerEntry>) -> Registry {
    let definitions = handlers.iter().map(|h| valid(h.name)).collect();
    Registry::build(
        definitions,
        handlers,
        Arc::new(PgLedger::start(w.test.db.clone())),
    )
    .unwrap()
}

fn limited(name: &'static str, limits: RateLimits) -> HandlerEntry {
    handler_with(
        name,
        "handlers/tests/registry.rs",
        Behaviour::Echo,
        meta(Duration::from_secs(5), limits, &[]),
    )
}

fn limited_tools() -> Vec<HandlerEntry> {
    vec![
        limited(
            "cooling",
            RateLimits {
                cooldown: Some(Duration::from_secs(60)),
                daily_limit: None,
            },
        ),
        limited(
            "brief_cooling",
            RateLimits {
                cooldown: Some(Duration::from_millis(300)),
                daily_limit: None,
            },
        ),
        limited(
            "twice_a_day",
            RateLimits {
                cooldown: None,
                daily_limit: Some(2),
            },
        ),
    ]
}

async fn run(registry: &Registry, tool: &str, ctx: &ToolContext) -> ToolResult {
    registry
        .execute_tool(tool, json!({}), ctx, &NoCallbacks)
        .await
}

fn assert_limited(r: &ToolResult, says: &[&str]) {
    assert_eq!(r.code(), Some(ErrorCode::RateLimited), "{r:?}");
    let error = r.error.as_ref().unwrap();
    assert!(error.retryable);
    for s in says {
        assert!(error.message.contains(s), "{:?} lacks {s:?}", error.message);
    }
}

#[tokio::test]
async fn rate_limits_hold_across_replicas() {
    let w = World::new().await;
    let one = replica(&w, limited_tools());
    let two = replica(&w, limited_tools());
    let alice = w.ctx(w.alice, None);
    let bob = w.ctx(w.bob, None);

    // Cooldown: the second replica knows of the first one's call.
    assert!(run(&one, "cooling", &alice).await.success);
    let refused = run(&two, "cooling", &alice).await;
    assert_limited(
        &refused,
        &[
            "cooling was called less than 60000 ms ago",
            "wait",
            "ms before calling it again",
        ],
    );
    assert_limited(&run(&one, "cooling", &alice).await, &["cooling"]);
    // Per user: bob has his own.
    assert!(run(&two, "cooling", &bob).await.success);

    // A short cooldown passes.
    assert!(run(&one, "brief_cooling", &alice).await.success);
    assert_limited(&run(&two, "brief_cooling", &alice).await, &["wait"]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(run(&two, "brief_cooling", &alice).await.success);

    // Daily limit: two calls between both replicas, then refused on either.
    assert!(run(&one, "twice_a_day", &alice).await.success);
    assert!(run(&two, "twice_a_day", &alice).await.success);
    for registry in [&one, &two] {
        assert_limited(
            &run(registry, "twice_a_day", &alice).await,
            &[
                "twice_a_day may be called 2 times per day",
                "resets at midnight UTC",
            ],
        );
    }
    assert!(run(&one, "twice_a_day", &bob).await.success);

    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let count: i32 = sqlx::query_scalar(
        "SELECT count FROM rate_limits WHERE user_id = $1 AND tool = 'twice_a_day'",
    )
    .bind(w.alice)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!(count, 2, "refused calls are not counted");
}

#[tokio::test]
async fn a_handler_past_its_timeout_is_cut_off() {
    let w = World::new().await;
    let registry = replica(
        &w,
        vec![
            handler_with(
                "slow",
                "handlers/tests/registry.rs",
                Behaviour::Sleep(Duration::from_secs(30)),
                meta(Duration::from_millis(100), RateLimits::NONE, &[]),
            ),
            handler_with(
                "quick",
                "handlers/tests/registry.rs",
                Behaviour::Sleep(Duration::from_millis(10)),
                meta(Duration::from_millis(2000), RateLimits::NONE, &[]),
            ),
        ],
    );
    let ctx = w.ctx(w.alice, None);
    let r = run(&registry, "slow", &ctx).await;
    assert_eq!(r.code(), Some(ErrorCode::Timeout), "{r:?}");
    let error = r.error.unwrap();
    assert!(error.retryable);
    assert_eq!(error.message, "slow did not finish within 100 ms");
    assert!((100..2000).contains(&r.duration_ms), "{}", r.duration_ms);
    assert!(run(&registry, "quick", &ctx).await.success);
}

#[tokio::test]
async fn a_panicking_handler_fails_the_call_not_the_process() {
    let w = World::new().await;
    let registry = replica(
        &w,
        vec![
            handler("boom", "handlers/tests/registry.rs", Behaviour::Panic),
            handler("echo", "handlers/tests/registry.rs", Behaviour::Echo),
        ],
    );
    let ctx = w.ctx(w.alice, None);
    for _ in 0..2 {
        let r = run(&registry, "boom", &ctx).await;
        assert_eq!(r.code(), Some(ErrorCode::Internal), "{r:?}");
        let message = r.error.unwrap().message;
        assert_eq!(message, "boom failed unexpectedly; the error was logged");
        assert!(!message.contains("a bug in a handler"));
        let echo = registry
            .execute_tool("echo", json!({ "text": "still here" }), &ctx, &NoCallbacks)
            .await;
        assert_eq!(echo.data.unwrap()["echo"]["text"], "still here");
    }
}

#[derive(Debug, PartialEq)]
struct AuditRow {
    tool: String,
    duration_ms: i32,
    user_id: Uuid,
    space_id: Option<Uuid>,
    request_id: String,
    call_id: String,
    parent_call_id: Option<String>,
    success: bool,
    error: Option<String>,
    args: Option<Value>,
}
data_plane_store::from_row!(AuditRow {
    tool,
    duration_ms,
    user_id,
    space_id,
    request_id,
    call_id,
    parent_call_id,
    success,
    error,
    args
});

#[tokio::test]
async fn every_call_leaves_an_audit_record() {
    let w = World::new().await;
    let id = w.doc("alpha/guides/vacuum.md");
    let missing = Uuid::new_v4();
    let ctx = |call: &str| {
        let mut ctx = w
            .ctx(w.alice, Some(w.alpha))
            .with_request_id("req-audit")
            .with_call_id(call);
        ctx.parent_call_id = Some("call-parent".into());
        ctx
    };
    let ok = w
        .call("stat", json!({ "document_id": id }), &ctx("call-1"))
        .await;
    let not_found = w
        .call(
            "document_info",
            json!({ "document_id": missing }),
            &ctx("call-2"),
        )
        .await;
    let unknown = w.call("no_such_tool", json!({}), &ctx("call-3")).await;
    // Without a call id the registry makes one up, and the record has it.
    let mut anonymous = w.ctx(w.bob, None).with_request_id("req-audit");
    anonymous.parent_call_id = None;
    let made_up = w.call("list_sources", json!({}), &anonymous).await;
    assert!(made_up.call_id.starts_with("call_"), "{}", made_up.call_id);
    w.ledger.flush().await;

    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let rows: Vec<AuditRow> = sqlx::query_as(
        "SELECT tool, duration_ms, user_id, space_id, request_id, call_id, parent_call_id,
                success, error, args
           FROM tool_calls WHERE request_id = 'req-audit' ORDER BY call_id",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    let row =
        |tool: &str, result: &ToolResult, user: Uuid, space: Option<Uuid>, args: Value| AuditRow {
            tool: tool.into(),
            duration_ms: result.duration_ms as i32,
            user_id: user,
            space_id: space,
            request_id: "req-audit".into(),
            call_id: result.call_id.clone(),
            parent_call_id: space.map(|_| "call-parent".into()),
            success: result.success,
            error: result.error.as_ref().map(|e| e.message.clone()),
            args: Some(args),
        };
    let expected = vec![
        row(
            "document_info",
            &ok,
            w.alice,
            Some(w.alpha),
            json!({ "document_id": id }),
        ),
        row(
            "document_info",
            &not_found,
            w.alice,
            Some(w.alpha),
            json!({ "document_id": missing }),
        ),
        row("no_such_tool", &unknown, w.alice, Some(w.alpha), json!({})),
        row("list_sources", &made_up, w.bob, None, json!({})),
    ];
    assert_eq!(rows, expected);
    assert!(
        rows[1]
            .error
            .as_ref()
            .unwrap()
            .contains(&missing.to_string())
    );
    assert_eq!(rows[0].call_id, "call-1");

    let recent: bool = sqlx::query_scalar(
        "SELECT bool_and(ts > now() - interval '1 minute') FROM tool_calls WHERE request_id = 'req-audit'",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert!(recent);
}

/// Stage one is the profile, stage two each tool's predicate and the
/// caller's permission; the deployment's facts move tools in and out.
#[tokio::test]
async fn agent_profiles_choose_the_offered_tools_before_predicates_and_permission() {
    use data_plane_registry::Deployment;
    let w = World::new().await;
    let settings = Arc::new(Settings {
        web_search_enabled: true,
        ..Settings::default()
    });
    let hosted = Deployment::default();
    let local = Deployment {
        local_model: true,
        ..hosted
    };
    let offered_under = |profile: &str, deployment: Deployment, permission: Permission| {
        let ctx = ToolContext::new(w.alice, Some(w.alpha), permission)
            .with_settings(settings.clone())
            .with_deployment(deployment);
        let ctx = w.registry.with_profile(ctx, profile).unwrap();
        let names: BTreeSet<String> = w
            .registry
            .available_entries(&ctx)
            .iter()
            .map(|e| e.name.clone())
            .collect();
        names
    };
    let set =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| n.to_string()).collect() };
    let all = set(&TOOLS);
    assert_eq!(offered_under("chat", hosted, Permission::User), all);
    assert_eq!(offered_under("service", hosted, Permission::User), all);
    let mut chat_local = all.clone();
    chat_local.remove("analyze_document");
    assert_eq!(
        offered_under("chat", local, Permission::User),
        chat_local,
        "a local model is spared analyze_document"
    );
    let explore = set(&[
        "document_info",
        "find_by_name",
        "folder_tree",
        "list_folder_contents",
        "list_sources",
        "read_document",
        "search_documents",
    ]);
    assert_eq!(offered_under("explore", hosted, Permission::User), explore);
    assert_eq!(
        offered_under("analyze_document", hosted, Permission::User),
        set(&[
            "document_info",
            "grep_documents",
            "query_documents",
            "read_document",
            "search_documents"
        ])
    );
    // Stage two: a guest under chat loses the user-level tools.
    let guest = offered_under("chat", hosted, Permission::Guest);
    for tool in ["analyze_document", "web_search", "fetch_web_page"] {
        assert!(!guest.contains(tool), "{tool} needs user");
    }
    assert!(guest.contains("search_documents"));

    // A call outside the profile is refused, and says why.
    let ctx = w
        .registry
        .with_profile(w.ctx(w.alice, Some(w.alpha)), "explore")
        .unwrap();
    let r = w
        .call("grep_documents", json!({ "pattern": "x" }), &ctx)
        .await;
    assert_eq!(r.code(), Some(ErrorCode::NotAvailable), "{r:?}");
    assert!(
        r.error
            .unwrap()
            .message
            .contains("this agent may not use it")
    );

    let unknown = w
        .registry
        .with_profile(w.ctx(w.alice, None), "chatt")
        .unwrap_err();
    assert!(
        unknown.contains("unknown agent profile \"chatt\""),
        "{unknown}"
    );
    assert!(unknown.contains("chat, explore"), "{unknown}");
}

/// Without an answering embedding engine search is offered in keyword mode
/// only, and a call asking for more is refused without embedding anything.
#[tokio::test]
async fn without_embeddings_search_offers_keyword_mode_only() {
    use data_plane_registry::Deployment;
    let w = World::new().await;
    let down = Deployment {
        embedding_ok: false,
        ..Deployment::default()
    };
    let ctx = w.ctx(w.alice, Some(w.alpha)).with_deployment(down);
    let search = w.registry.get("search_documents").unwrap();
    let offered = search.definition_for(&ctx);
    assert_eq!(
        offered["parameters"]["properties"]["mode"]["enum"],
        json!(["keyword"])
    );
    let up = search.definition_for(&w.ctx(w.alice, Some(w.alpha)));
    assert_eq!(
        up["parameters"]["properties"]["mode"]["enum"],
        json!(["hybrid", "vector", "keyword"])
    );
    let listed = w.registry.get_available_tools(&ctx);
    let listed = listed
        .iter()
        .find(|t| t["function"]["name"] == "search_documents")
        .unwrap();
    assert_eq!(listed["function"], *offered);

    let r = w
        .call(
            "search_documents",
            json!({ "query": "vacuum", "mode": "hybrid" }),
            &ctx,
        )
        .await;
    assert_eq!(r.code(), Some(ErrorCode::NotAvailable), "{r:?}");
    assert!(r.error.unwrap().message.contains("use mode keyword"));
    let r = w
        .call("search_documents", json!({ "query": "vacuum" }), &ctx)
        .await;
    assert!(r.success, "{r:?}");
    assert_eq!(r.data.unwrap()["mode"], "keyword");
}

/// A profile naming what does not exist stops start-up, naming its file;
/// so does a file not named after its profile, or one with an unknown key.
#[test]
fn a_profile_naming_an_unknown_tool_or_category_fails_start_up_naming_the_file() {
    let build = |file: &str, text: &str| {
        let mut definitions = data_plane_handlers::definitions();
        definitions.push(DefinitionFile {
            file: file.into(),
            text: text.into(),
        });
        Registry::build(
            definitions,
            data_plane_handlers::all(None),
            Arc::new(NoLedger),
        )
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let cases = [
        (
            "definitions/agents/odd.json",
            r#"{"name": "odd", "description": "d", "tools": ["grep_document"]}"#,
            vec![
                "definitions/agents/odd.json",
                "unknown tool \"grep_document\"",
                "grep_documents",
            ],
        ),
        (
            "definitions/agents/odd.json",
            r#"{"name": "odd", "description": "d", "categories": ["files"]}"#,
            vec!["definitions/agents/odd.json", "unknown category \"files\""],
        ),
        (
            "definitions/agents/odd.json",
            r#"{"name": "odd", "description": "d", "tools": ["read_document"], "exclude_in_local": {"tools": ["nope"]}}"#,
            vec!["exclude_in_local names the unknown tool \"nope\""],
        ),
        (
            "definitions/agents/odd.json",
            r#"{"name": "even", "description": "d", "tools": ["read_document"]}"#,
            vec!["definitions/agents/odd.json", "named after its profile"],
        ),
        (
            "definitions/agents/odd.json",
            r#"{"name": "odd", "description": "d", "tool": ["read_document"]}"#,
            vec!["definitions/agents/odd.json", "unknown field `tool`"],
        ),
        (
            "definitions/agents/odd.json",
            r#"{"name": "odd", "description": "d"}"#,
            vec!["definitions/agents/odd.json", "offers no tool"],
        ),
        (
            "definitions/agents/odd.json",
            r#"{"name": "odd", "description": "d", "modules": ["crm", "Bad.Name"]}"#,
            vec!["definitions/agents/odd.json", "modules names \"Bad.Name\""],
        ),
        (
            "definitions/agents/odd.json",
            r#"{"name": "odd", "description": "d", "categories": ["module"]}"#,
            vec!["unknown category \"module\""],
        ),
    ];
    for (file, text, words) in cases {
        let error = build(file, text);
        for word in words {
            assert!(error.contains(word), "{text}: {error}");
        }
    }
}

/// The annotations of every tool, derived by the written rules from its
/// category and what its metadata states.
#[test]
fn annotations_follow_the_written_rules() {
    let registry = data_plane_handlers::offline_registry().unwrap();
    let flags: Vec<(String, String)> = registry
        .tools()
        .iter()
        .map(|t| (t.name.clone(), t.annotations.flags()))
        .collect();
    let expected: Vec<(String, String)> = TOOLS
        .iter()
        .map(|&name| {
            let flags = match name {
                "analyze_document" => "read_only",
                "fetch_web_page" | "web_search" => "read_only,open_world",
                _ => "read_only,idempotent",
            };
            (name.to_string(), flags.to_string())
        })
        .collect();
    assert_eq!(flags, expected);
}

/// The audit record keeps the tool's annotations, the profile, and what
/// the call did beyond answering.
#[tokio::test]
async fn the_audit_record_holds_annotations_side_effects_and_the_profile() {
    let w = World::new().await;
    let ctx = w
        .registry
        .with_profile(
            w.ctx(w.alice, Some(w.alpha))
                .with_request_id("req-governance"),
            "explore",
        )
        .unwrap();
    let r = w.call("list_sources", json!({}), &ctx).await;
    assert!(r.success, "{r:?}");
    assert!(r.side_effects.is_empty(), "listing does nothing else");
    let refused = w.call("web_search", json!({ "query": "q" }), &ctx).await;
    assert_eq!(refused.code(), Some(ErrorCode::NotAvailable));
    w.ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let rows: Vec<GovernanceRow> = sqlx::query_as(
        "SELECT tool, annotations, agent, side_effects, gate
               FROM tool_calls WHERE request_id = 'req-governance' ORDER BY tool",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].0, "list_sources");
    assert_eq!(
        rows[0].1,
        Some(json!({
            "read_only": true, "destructive": false, "idempotent": true,
            "open_world": false, "requires_confirmation": false
        }))
    );
    assert_eq!(rows[0].2.as_deref(), Some("explore"));
    assert_eq!(rows[1].0, "web_search");
    assert_eq!(rows[1].1.as_ref().unwrap()["open_world"], true);
    assert!(rows.iter().all(|r| r.3.is_empty() && r.4.is_none()));
}

/// tool, annotations, agent, side_effects, gate
type GovernanceRow = (
    String,
    Option<Value>,
    Option<String>,
    Vec<String>,
    Option<String>,
);

#[tokio::test]
async fn audit_records_are_written_whole_in_batches_of_every_size() {
    use data_plane_registry::{Annotations, AuditRecord, Ledger};

    let w = World::new().await;
    // More than one batch (512), so that a full one and a short one are
    // written; every field varies, nulls and empty lists included.
    let total = 700;
    let record = |i: usize| AuditRecord {
        tool: format!("tool_{}", i % 7),
        call_id: format!("call-batch-{i:04}"),
        duration_ms: i as u64,
        ts: chrono::Utc::now(),
        user_id: if i.is_multiple_of(2) { w.alice } else { w.bob },
        space_id: (!i.is_multiple_of(3)).then_some(w.alpha),
        request_id: "req-batch".into(),
        parent_call_id: (i.is_multiple_of(4)).then(|| format!("parent-{i}")),
        success: !i.is_multiple_of(5),
        error: (i.is_multiple_of(5)).then(|| format!("failed \"{i}\"\n\ttab, comma, {{braces}}")),
        args: match i % 3 {
            0 => Value::Null,
            1 => json!({ "q": format!("it's {i}"), "n": [i, null, {"nested": true}] }),
            _ => json!({}),
        },
        annotations: (i.is_multiple_of(2)).then(|| Annotations {
            read_only: i.is_multiple_of(4),
            destructive: i % 8 == 2,
            idempotent: true,
            open_world: false,
            requires_confirmation: i % 16 == 6,
        }),
        side_effects: (0..i % 3)
            .map(|k| format!("fetched https://example.com/{i}/{k}, \"quoted\""))
            .collect(),
        gate: (i.is_multiple_of(6)).then(|| "allow".to_string()),
        agent: (i % 2 == 1).then(|| "explore".to_string()),
        module: (i.is_multiple_of(10)).then(|| "notes".to_string()),
        attempts: 1 + (i % 2) as u32,
    };
    for i in 0..total {
        w.ledger.record(record(i)).await.unwrap();
    }
    w.ledger.flush().await;
    assert_eq!(w.ledger.audit_write_failures(), 0);

    #[derive(Debug, PartialEq)]
    struct Row {
        tool: String,
        call_id: String,
        duration_ms: i32,
        user_id: Uuid,
        space_id: Option<Uuid>,
        parent_call_id: Option<String>,
        success: bool,
        error: Option<String>,
        args: Option<Value>,
        annotations: Option<Value>,
        side_effects: Vec<String>,
        gate: Option<String>,
        agent: Option<String>,
        module: Option<String>,
        attempts: i16,
    }
    data_plane_store::from_row!(Row {
        tool,
        call_id,
        duration_ms,
        user_id,
        space_id,
        parent_call_id,
        success,
        error,
        args,
        annotations,
        side_effects,
        gate,
        agent,
        module,
        attempts
    });
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT tool, call_id, duration_ms, user_id, space_id, parent_call_id, success, error,
                args, annotations, side_effects, gate, agent, module, attempts
           FROM tool_calls WHERE request_id = 'req-batch' ORDER BY call_id",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    assert_eq!(rows.len(), total);
    for (i, row) in rows.into_iter().enumerate() {
        let r = record(i);
        let expected = Row {
            tool: r.tool,
            call_id: r.call_id,
            duration_ms: r.duration_ms as i32,
            user_id: r.user_id,
            space_id: r.space_id,
            parent_call_id: r.parent_call_id,
            success: r.success,
            error: r.error,
            args: Some(r.args),
            annotations: r.annotations.map(|a| serde_json::to_value(a).unwrap()),
            side_effects: r.side_effects,
            gate: r.gate,
            agent: r.agent,
            module: r.module,
            attempts: r.attempts as i16,
        };
        assert_eq!(row, expected, "record {i}");
    }
}

/// Unavailable on its first call, then answers.
struct FailsOnce(std::sync::atomic::AtomicUsize);

#[async_trait]
impl ToolHandler for FailsOnce {
    async fn call(
        &self,
        _args: Value,
        _ctx: &ToolContext,
        _callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        match self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => Err(ToolError::unavailable("the backend is briefly away")),
            n => Ok(json!({ "run": n + 1 })),
        }
    }
}

/// A retried call is one call: one `tool_call` and one `tool_result` (with
/// `attempts: 2`) under its one id, and one audit row that says 2. Only a
/// context that asks for it retries, and never a tool that is not
/// idempotent.
#[tokio::test]
async fn a_retried_call_is_one_call_with_one_id_one_result_and_one_audit_row() {
    let w = World::new().await;
    let ledger = PgLedger::start(w.test.db.clone());
    let flaky = |name: &'static str, idempotent: bool| {
        let mut meta = meta(Duration::from_secs(5), RateLimits::NONE, &[]);
        meta.annotations.idempotent = Some(idempotent);
        HandlerEntry {
            name,
            file: "handlers/tests/registry.rs",
            meta,
            available: |_| true,
            shape: None,
            asks: None,
            handler: Arc::new(FailsOnce(Default::default())),
            args_schema: json!({}),
            output_schema: None,
        }
    };
    let handlers = vec![flaky("flaky", true), flaky("flaky_write", false)];
    let definitions = handlers.iter().map(|h| valid(h.name)).collect();
    let registry = Registry::build(definitions, handlers, Arc::new(ledger.clone())).unwrap();

    let (callbacks, mut reports) =
        data_plane_registry::ChannelCallbacks::<data_plane_registry::Report>::channel();
    let ctx = w
        .ctx(w.alice, None)
        .with_call_id("call-retried")
        .with_retry_once();
    let r = registry
        .execute_tool("flaky", json!({}), &ctx, &callbacks)
        .await;
    assert!(r.success, "{r:?}");
    assert_eq!(r.attempts, 2);
    assert_eq!(r.data.as_ref().unwrap()["run"], 2);
    assert_eq!(serde_json::to_value(&r).unwrap()["attempts"], 2);
    let (mut seen, mut logs) = (Vec::new(), Vec::new());
    while let Ok(report) = reports.try_recv() {
        match report {
            data_plane_registry::Report::Event(event) => {
                seen.push(serde_json::to_value(&event).unwrap())
            }
            data_plane_registry::Report::Log(line) => {
                assert_eq!(line.call_id, "call-retried");
                assert_eq!(line.tool, "flaky");
                logs.push((line.level, line.message));
            }
        }
    }
    // What a client that asked for logs hears: the start, the retry and
    // why, the end after two attempts.
    use data_plane_registry::LogLevel;
    assert_eq!(logs.len(), 3, "{logs:?}");
    assert_eq!(logs[0], (LogLevel::Info, "flaky started".to_string()));
    assert_eq!(
        logs[1],
        (
            LogLevel::Warning,
            "the backend is briefly away; retrying once".to_string()
        )
    );
    assert_eq!(logs[2].0, LogLevel::Info);
    assert!(
        logs[2].1.starts_with("flaky finished in ") && logs[2].1.ends_with(" after 2 attempts"),
        "{logs:?}"
    );
    let kinds: Vec<(&str, &str)> = seen
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["call_id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("tool_call", "call-retried"),
            ("tool_result", "call-retried")
        ]
    );

    // Not idempotent: the failure goes back as it is, after one run.
    let once = registry
        .execute_tool(
            "flaky_write",
            json!({}),
            &ctx.clone().with_call_id("call-write"),
            &NoCallbacks,
        )
        .await;
    assert_eq!(once.code(), Some(ErrorCode::Unavailable), "{once:?}");
    assert_eq!(once.attempts, 1);
    assert!(
        serde_json::to_value(&once)
            .unwrap()
            .get("attempts")
            .is_none()
    );

    ledger.flush().await;
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let rows: Vec<(String, bool, i16)> = sqlx::query_as(
        "SELECT call_id, success, attempts FROM tool_calls
          WHERE call_id IN ('call-retried', 'call-write') ORDER BY call_id",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    assert_eq!(
        rows,
        [
            ("call-retried".to_string(), true, 2),
            ("call-write".to_string(), false, 1)
        ]
    );
}

/// A profile's conditions as the deployment changes: `add_when_non_local`
/// adds only for a hosted model, `add_when_embedding_ok` only while the
/// embedding engine answers, and `exclude_in_local` takes away last, even
/// what an addition named.
#[test]
fn a_profile_adds_by_the_deployments_facts_and_excludes_last() {
    use data_plane_registry::Deployment;
    let mut definitions = data_plane_handlers::definitions();
    definitions.push(DefinitionFile {
        file: "definitions/agents/conditional.json".into(),
        text: json!({
            "name": "conditional",
            "description": "a profile of the registry tests",
            "tools": ["document_info"],
            "add_when_non_local": { "tools": ["fetch_web_page", "read_document"], "categories": ["navigation"] },
            "add_when_embedding_ok": { "tools": ["search_documents", "read_document"] },
            "exclude_in_local": { "tools": ["read_document"] },
            "chat": true
        })
        .to_string(),
    });
    let registry = Registry::build(
        definitions,
        data_plane_handlers::all(None),
        Arc::new(NoLedger),
    )
    .unwrap();
    let profile = registry.profile("conditional").unwrap();
    let tools_for = |local_model: bool, embedding_ok: bool| -> Vec<String> {
        profile
            .tools_for(Deployment {
                local_model,
                embedding_ok,
            })
            .to_vec()
    };
    let navigation = ["folder_tree", "list_folder_contents", "list_sources"];
    let mut hosted_up: Vec<&str> = vec![
        "document_info",
        "fetch_web_page",
        "read_document",
        "search_documents",
    ];
    hosted_up.extend(navigation);
    hosted_up.sort();
    assert_eq!(tools_for(false, true), hosted_up);
    let mut hosted_down: Vec<&str> = vec!["document_info", "fetch_web_page", "read_document"];
    hosted_down.extend(navigation);
    hosted_down.sort();
    assert_eq!(tools_for(false, false), hosted_down);
    assert_eq!(
        tools_for(true, true),
        ["document_info", "search_documents"],
        "a local model gets the embedding's addition, never what exclude_in_local names"
    );
    assert_eq!(tools_for(true, false), ["document_info"]);

    // What a request is offered follows the same facts.
    let offered = |deployment: Deployment| -> Vec<String> {
        let ctx = ToolContext::new(Uuid::new_v4(), Some(Uuid::new_v4()), Permission::User)
            .with_deployment(deployment);
        let ctx = registry.with_profile(ctx, "conditional").unwrap();
        registry
            .available_entries(&ctx)
            .iter()
            .map(|e| e.name.clone())
            .collect()
    };
    let local_down = Deployment {
        local_model: true,
        embedding_ok: false,
    };
    assert_eq!(offered(local_down), ["document_info"]);
    assert_eq!(
        offered(Deployment {
            local_model: false,
            embedding_ok: true
        })
        .len(),
        hosted_up.len()
    );
}
