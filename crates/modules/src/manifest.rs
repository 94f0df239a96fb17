//! Reading a module's manifest, in either shape a module may answer:
//!
//! - a data-plane server's: `{name, version, protocol:
//!   "data-plane-module/1", tools: [{name, definition (an OpenAI tool),
//!   metadata}]}`, tool names without the module's prefix;
//! - the common module contract: `{name, description?, version?, tools:
//!   [{name: "module.tool", description, parameters: [{name, type,
//!   description, required, enum?}], required_permission}]}`, the
//!   parameters a list (a JSON Schema object is taken as well).
//!
//! A tool the server cannot offer is left out with the reason, never the
//! whole manifest; a manifest that is not one at all is an error.

use data_plane_registry::{AnnotationHints, Permission};
use serde_json::{Map, Value, json};

/// The most tools one module may offer; the rest are left out.
pub const MAX_TOOLS: usize = 128;
/// The longest description kept (characters); a longer one is cut.
pub const MAX_DESCRIPTION: usize = 4096;
/// The largest argument schema accepted for one tool (bytes of JSON).
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// The most tools left out that are named one by one (logs and the admin
/// listing stay readable); the rest are counted.
const MAX_SKIPPED: usize = 32;
/// The longest one-line summary (characters).
const MAX_SUMMARY: usize = 120;

/// A manifest as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// What the module calls itself (it may differ from the configured name,
    /// which is the one its tools take).
    pub name: Option<String>,
    pub version: Option<String>,
    /// `data-plane-module/1` for a data-plane server; `None` for the common
    /// contract.
    pub protocol: Option<String>,
    pub tools: Vec<ManifestTool>,
    /// Tools left out, each with why.
    pub skipped: Vec<String>,
}

/// One tool of a manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestTool {
    /// The name `/execute` is called with, as the manifest wrote it.
    pub remote_name: String,
    /// The name within the module: `remote_name` without the module's
    /// prefix (the part after the first dot in the common contract).
    pub name: String,
    pub description: String,
    pub summary: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    pub permission: Permission,
    pub hints: AnnotationHints,
}

/// Reads `value` as a manifest; an error says why it is none.
pub fn parse(value: &Value) -> Result<Manifest, String> {
    let obj = value
        .as_object()
        .ok_or_else(|| format!("the manifest must be a JSON object, not {}", kind(value)))?;
    let tools = obj
        .get("tools")
        .and_then(Value::as_array)
        .ok_or("the manifest has no \"tools\" list")?;
    let text = |key: &str| obj.get(key).and_then(Value::as_str).map(str::to_string);
    let protocol = text("protocol");
    let ours = protocol
        .as_deref()
        .is_some_and(|p| p.starts_with("data-plane-module/"));
    let mut manifest = Manifest {
        name: text("name"),
        version: obj.get("version").map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        protocol,
        tools: Vec::new(),
        skipped: Vec::new(),
    };
    for (i, tool) in tools.iter().enumerate() {
        let label = tool
            .get("name")
            .and_then(Value::as_str)
            .map_or_else(|| format!("tool #{}", i + 1), str::to_string);
        if manifest.tools.len() == MAX_TOOLS {
            manifest.skipped.push(format!(
                "{label}: the module offers more than {MAX_TOOLS} tools"
            ));
            continue;
        }
        let read = if ours {
            ours_tool(tool)
        } else {
            common_tool(tool)
        };
        match read.and_then(check_size) {
            Ok(t) => {
                if manifest.tools.iter().any(|o| o.name == t.name) {
                    manifest
                        .skipped
                        .push(format!("{label}: a tool of that name came earlier"));
                } else {
                    manifest.tools.push(t);
                }
            }
            Err(why) => manifest.skipped.push(format!("{label}: {why}")),
        }
    }
    if manifest.skipped.len() > MAX_SKIPPED {
        let more = manifest.skipped.len() - MAX_SKIPPED;
        manifest.skipped.truncate(MAX_SKIPPED);
        manifest.skipped.push(format!("and {more} more tools"));
    }
    Ok(manifest)
}

/// A tool of a data-plane server's manifest.
fn ours_tool(tool: &Value) -> Result<ManifestTool, String> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or("no \"name\"")?;
    if name.contains('.') {
        // The server's own modules' tools: taking them again would let two
        // servers that use each other echo their tools back and forth.
        return Err(
            "a tool of one of that server's own modules; configure its module directly".into(),
        );
    }
    let definition = tool.get("definition").ok_or("no \"definition\"")?;
    let function = definition.get("function").unwrap_or(definition);
    let description = function
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let parameters = function
        .get("parameters")
        .cloned()
        .ok_or("the definition has no \"parameters\"")?;
    let metadata = tool.get("metadata").cloned().unwrap_or(Value::Null);
    let permission = permission(metadata.get("permission"))?;
    let hints = hints(metadata.get("annotations"));
    let summary = metadata
        .get("short_description")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map_or_else(|| summary(description), |s| clip(s, MAX_SUMMARY));
    Ok(ManifestTool {
        remote_name: name.to_string(),
        name: name.to_string(),
        description: clip(description, MAX_DESCRIPTION),
        summary,
        parameters,
        permission,
        hints,
    })
}

/// A tool of the common module contract.
fn common_tool(tool: &Value) -> Result<ManifestTool, String> {
    let remote_name = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or("no \"name\"")?;
    let name = remote_name
        .split_once('.')
        .map_or(remote_name, |(_, tool)| tool);
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let parameters = match tool.get("parameters") {
        None | Some(Value::Null) => json!({ "type": "object", "properties": {} }),
        Some(Value::Array(list)) => schema_of_list(list)?,
        Some(schema @ Value::Object(_)) => schema.clone(),
        Some(other) => {
            return Err(format!(
                "\"parameters\" must be a list or a JSON Schema, not {}",
                kind(other)
            ));
        }
    };
    Ok(ManifestTool {
        remote_name: remote_name.to_string(),
        name: name.to_string(),
        description: clip(description, MAX_DESCRIPTION),
        summary: summary(description),
        parameters,
        permission: permission(tool.get("required_permission"))?,
        hints: hints(tool.get("annotations")),
    })
}

/// The JSON Schema object of a parameter list: one property per item
/// (type, description, enum), the required ones listed, nothing else
/// accepted (a misspelt argument is refused before the module is called).
fn schema_of_list(list: &[Value]) -> Result<Value, String> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for p in list {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or("a parameter has no \"name\"")?;
        let mut schema = Map::new();
        match p.get("type").and_then(Value::as_str) {
            Some(t @ ("string" | "number" | "integer" | "boolean" | "array" | "object")) => {
                schema.insert("type".into(), json!(t));
            }
            Some("float") => {
                schema.insert("type".into(), json!("number"));
            }
            Some("int") => {
                schema.insert("type".into(), json!("integer"));
            }
            Some("bool") => {
                schema.insert("type".into(), json!("boolean"));
            }
            Some(other) => {
                return Err(format!("parameter {name} has an unknown type {other:?}"));
            }
            None => {}
        }
        if let Some(d) = p.get("description").and_then(Value::as_str) {
            schema.insert("description".into(), json!(clip(d, MAX_DESCRIPTION)));
        }
        if let Some(values) = p.get("enum").and_then(Value::as_array) {
            schema.insert("enum".into(), Value::Array(values.clone()));
        }
        if let Some(items) = p.get("items").filter(|i| i.is_object()) {
            schema.insert("items".into(), items.clone());
        }
        if p.get("required").and_then(Value::as_bool).unwrap_or(false) {
            required.push(json!(name));
        }
        if properties
            .insert(name.to_string(), Value::Object(schema))
            .is_some()
        {
            return Err(format!("parameter {name} is listed twice"));
        }
    }
    Ok(json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    }))
}

/// A stated permission; none means guest, an unknown one leaves the tool out
/// (guessing would open it to everyone).
fn permission(value: Option<&Value>) -> Result<Permission, String> {
    match value {
        None | Some(Value::Null) => Ok(Permission::Guest),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|_| format!("unknown required permission {v} (guest, user, admin or owner)")),
    }
}

/// The annotations a manifest states, in our names (`read_only`) or MCP's
/// (`readOnlyHint`); anything else is ignored.
fn hints(value: Option<&Value>) -> AnnotationHints {
    let Some(obj) = value.and_then(Value::as_object) else {
        return AnnotationHints::DERIVED;
    };
    let flag = |ours: &str, mcp: &str| {
        obj.get(ours)
            .or_else(|| obj.get(mcp))
            .and_then(Value::as_bool)
    };
    AnnotationHints {
        read_only: flag("read_only", "readOnlyHint"),
        destructive: flag("destructive", "destructiveHint"),
        idempotent: flag("idempotent", "idempotentHint"),
        open_world: flag("open_world", "openWorldHint"),
        requires_confirmation: flag("requires_confirmation", "requiresConfirmation"),
    }
}

fn check_size(tool: ManifestTool) -> Result<ManifestTool, String> {
    let size = tool.parameters.to_string().len();
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its argument schema is {size} bytes, over the {MAX_SCHEMA_BYTES} accepted"
        ));
    }
    Ok(tool)
}

/// The description's first sentence (or line), cut to a summary's length.
fn summary(description: &str) -> String {
    let first = description.trim().lines().next().unwrap_or_default();
    let sentence = first
        .find(". ")
        .map_or(first, |end| &first[..end])
        .trim_end_matches('.');
    clip(sentence, MAX_SUMMARY)
}

/// `text` cut to `max` characters, marked with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_contract_becomes_json_schema() {
        let manifest = parse(&json!({
            "name": "crm",
            "version": 3,
            "tools": [
                {
                    "name": "crm.lookup_customer",
                    "description": "Find a customer by email. Returns the account and its owner.",
                    "parameters": [
                        {"name": "email", "type": "string", "description": "The customer's email", "required": true},
                        {"name": "fields", "type": "array", "items": {"type": "string"}},
                        {"name": "region", "type": "string", "enum": ["eu", "us"]},
                        {"name": "limit", "type": "int"}
                    ],
                    "required_permission": "user",
                    "annotations": {"readOnlyHint": true, "idempotentHint": true}
                },
                {"name": "crm.ping"},
                {"name": "crm.bad_permission", "required_permission": "root"},
                {"name": "crm.bad_type", "parameters": [{"name": "x", "type": "decimal"}]},
                {"name": "crm.lookup_customer"},
                {"description": "no name"}
            ]
        }))
        .unwrap();
        assert_eq!(manifest.name.as_deref(), Some("crm"));
        assert_eq!(manifest.version.as_deref(), Some("3"));
        assert_eq!(manifest.protocol, None);
        let lookup = &manifest.tools[0];
        assert_eq!(lookup.remote_name, "crm.lookup_customer");
        assert_eq!(lookup.name, "lookup_customer");
        assert_eq!(lookup.summary, "Find a customer by email");
        assert_eq!(lookup.permission, Permission::User);
        assert_eq!(lookup.hints.read_only, Some(true));
        assert_eq!(lookup.hints.idempotent, Some(true));
        assert_eq!(lookup.hints.destructive, None);
        assert_eq!(
            lookup.parameters,
            json!({
                "type": "object",
                "properties": {
                    "email": {"type": "string", "description": "The customer's email"},
                    "fields": {"type": "array", "items": {"type": "string"}},
                    "region": {"type": "string", "enum": ["eu", "us"]},
                    "limit": {"type": "integer"}
                },
                "required": ["email"],
                "additionalProperties": false
            })
        );
        let ping = &manifest.tools[1];
        assert_eq!(ping.permission, Permission::Guest);
        assert_eq!(ping.parameters["type"], "object");
        assert_eq!(manifest.tools.len(), 2);
        assert_eq!(
            manifest.skipped,
            [
                "crm.bad_permission: unknown required permission \"root\" (guest, user, admin or owner)",
                "crm.bad_type: parameter x has an unknown type \"decimal\"",
                "crm.lookup_customer: a tool of that name came earlier",
                "tool #6: no \"name\"",
            ]
        );
    }

    #[test]
    fn a_data_plane_manifest_keeps_its_definitions_and_annotations() {
        let manifest = parse(&json!({
            "name": "data-plane",
            "version": "0.1.0",
            "protocol": "data-plane-module/1",
            "tools": [
                {
                    "name": "document_info",
                    "definition": {"type": "function", "function": {
                        "name": "document_info",
                        "description": "Metadata of one document.",
                        "parameters": {"type": "object", "properties": {"document_id": {"type": "string"}}, "required": ["document_id"], "additionalProperties": false}
                    }},
                    "metadata": {
                        "short_description": "extracted metadata of one document",
                        "permission": "guest",
                        "annotations": {"read_only": true, "destructive": false, "idempotent": true, "open_world": false, "requires_confirmation": false}
                    }
                },
                {"name": "crm.lookup", "definition": {"function": {"name": "crm__lookup", "parameters": {"type": "object"}}}}
            ]
        }))
        .unwrap();
        assert_eq!(manifest.protocol.as_deref(), Some("data-plane-module/1"));
        let info = &manifest.tools[0];
        assert_eq!(info.name, "document_info");
        assert_eq!(info.remote_name, "document_info");
        assert_eq!(info.summary, "extracted metadata of one document");
        assert_eq!(info.parameters["required"], json!(["document_id"]));
        assert_eq!(info.hints.idempotent, Some(true));
        assert_eq!(info.hints.open_world, Some(false));
        assert_eq!(manifest.tools.len(), 1);
        assert!(
            manifest.skipped[0]
                .starts_with("crm.lookup: a tool of one of that server's own modules"),
            "{:?}",
            manifest.skipped
        );
    }

    #[test]
    fn what_is_not_a_manifest_says_why() {
        let check = |value: Value, words: &str| {
            let err = parse(&value).unwrap_err();
            assert!(err.contains(words), "{value}: {err}");
        };
        check(json!([1, 2]), "must be a JSON object, not a list");
        check(json!("tools"), "not a string");
        check(json!({"name": "x"}), "no \"tools\" list");
        check(json!({"tools": {"a": 1}}), "no \"tools\" list");
    }

    #[test]
    fn caps_hold() {
        let tools: Vec<Value> = (0..MAX_TOOLS + 3)
            .map(|i| json!({"name": format!("m.t{i}")}))
            .collect();
        let manifest = parse(&json!({ "tools": tools })).unwrap();
        assert_eq!(manifest.tools.len(), MAX_TOOLS);
        assert_eq!(manifest.skipped.len(), 3);
        assert!(manifest.skipped[0].contains("more than 128 tools"));
        let tools: Vec<Value> = (0..MAX_TOOLS + 100)
            .map(|i| json!({"name": format!("m.t{i}")}))
            .collect();
        let manifest = parse(&json!({ "tools": tools })).unwrap();
        assert_eq!(manifest.skipped.len(), MAX_SKIPPED + 1);
        assert_eq!(manifest.skipped[MAX_SKIPPED], "and 68 more tools");

        let long = "x".repeat(MAX_DESCRIPTION + 10);
        let huge: Vec<Value> = (0..3000)
            .map(|i| json!({"name": format!("p{i}"), "type": "string", "description": "a parameter with some words"}))
            .collect();
        let manifest = parse(&json!({"tools": [
            {"name": "m.long", "description": long},
            {"name": "m.huge", "parameters": huge}
        ]}))
        .unwrap();
        assert_eq!(
            manifest.tools[0].description.chars().count(),
            MAX_DESCRIPTION + 1
        );
        assert!(manifest.tools[0].description.ends_with('…'));
        assert!(manifest.tools[0].summary.chars().count() <= MAX_SUMMARY + 1);
        assert!(
            manifest.skipped[0].contains("over the 65536 accepted"),
            "{:?}",
            manifest.skipped
        );
    }
}
