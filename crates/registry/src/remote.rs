//! Remote modules' tools as registry entries: what a discovered manifest
//! states about one tool, turned into a [`ToolEntry`] whose handler is the
//! module's `/execute`, and the set of such entries the registry swaps
//! whole when a module's manifest changes.
//!
//! A remote tool is named `module.tool` everywhere (listings, the audit,
//! executeTool); the model sees `module__tool`, since function names may
//! hold no dot, and both names call it.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::entry::ToolEntry;
use crate::entry::{AnnotationHints, Category, CostTier, RateLimits, ToolHandler, ToolMeta};
use crate::profile::valid_module_name;
use crate::{Annotations, Permission, ToolContext};

/// The longest name a model may be given for a function.
const MAX_FUNCTION_NAME: usize = 64;

/// One tool of a module's manifest, as the module client read it.
pub struct RemoteTool {
    /// The module's name, as the deployment configures it.
    pub module: String,
    /// The tool's own name within the module (after `module.`).
    pub name: String,
    pub description: String,
    /// One line for listings and the system prompt.
    pub summary: String,
    /// JSON Schema of the arguments (`type: object`).
    pub parameters: Value,
    pub permission: Permission,
    pub hints: AnnotationHints,
    /// How long one call may take, retries included.
    pub timeout: Duration,
    /// Where it came from, for logs and listings (`module crm: http://…`).
    pub source: String,
    pub handler: Arc<dyn ToolHandler>,
}

/// The name models see for a remote tool: `module__tool`, each character
/// of the tool's name a function name cannot hold replaced by `_`.
pub fn wire_name(module: &str, tool: &str) -> String {
    let tool: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{module}__{tool}")
}

fn always(_: &ToolContext) -> bool {
    true
}

impl ToolEntry {
    /// A remote module's tool, checked: a valid module name, a tool name
    /// that fits a function name, and parameters that are a JSON Schema of
    /// an object which compiles.
    pub fn remote(tool: RemoteTool) -> Result<ToolEntry, String> {
        let RemoteTool {
            module,
            name,
            description,
            summary,
            parameters,
            permission,
            hints,
            timeout,
            source,
            handler,
        } = tool;
        if !valid_module_name(&module) {
            return Err(format!("{module:?} is not a valid module name"));
        }
        if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(format!(
                "tool name {name:?} must be non-empty, without spaces or control characters"
            ));
        }
        let wire = wire_name(&module, &name);
        if wire.len() > MAX_FUNCTION_NAME {
            return Err(format!(
                "tool name {name:?} is too long: {wire} exceeds the {MAX_FUNCTION_NAME} characters of a function name"
            ));
        }
        if parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!(
                "{name}: parameters must be a JSON Schema with \"type\": \"object\""
            ));
        }
        jsonschema::meta::validate(&parameters)
            .map_err(|e| format!("{name}: parameters are not valid JSON Schema: {e}"))?;
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&parameters)
            .map_err(|e| format!("{name}: parameters cannot be compiled: {e}"))?;
        let annotations = Annotations::derive(Category::Module, hints);
        if annotations.read_only && annotations.destructive {
            return Err(format!(
                "{name}: a tool cannot be both read-only and destructive"
            ));
        }
        let description = if description.trim().is_empty() {
            format!("{name} of module {module}.")
        } else {
            description
        };
        Ok(ToolEntry {
            name: format!("{module}.{name}"),
            definition: Arc::new(json!({
                "name": wire,
                "description": description,
                "parameters": parameters,
            })),
            definition_file: source,
            handler_file: "a remote module",
            meta: ToolMeta {
                category: Category::Module,
                short_description: "",
                available_when: "its module's manifest has been discovered",
                aliases: &[],
                annotations: hints,
                cost: CostTier::Expensive,
                permission,
                timeout,
                limits: RateLimits::NONE,
                requires_gate: true,
                defer_loading: false,
                tag: None,
            },
            summary: Cow::Owned(summary),
            module: Some(module),
            annotations,
            available: always,
            shape: None,
            asks: None,
            args_schema: parameters,
            // A module's manifest says nothing of what its tools return.
            output_schema: None,
            tag: None,
            handler,
            validator,
        })
    }
}

/// The remote tools the registry knows, by module; swapped whole on a change.
#[derive(Default)]
pub(crate) struct RemoteTools {
    pub(crate) modules: BTreeMap<String, Vec<Arc<ToolEntry>>>,
    /// By `module.tool` and by `module__tool`.
    pub(crate) by_name: HashMap<String, Arc<ToolEntry>>,
}

impl RemoteTools {
    /// These tools with module `module`'s replaced by `tools` (none: the
    /// module is gone).
    pub(crate) fn with_module(&self, module: &str, tools: Vec<Arc<ToolEntry>>) -> RemoteTools {
        let mut modules = self.modules.clone();
        if tools.is_empty() {
            modules.remove(module);
        } else {
            modules.insert(module.to_string(), tools);
        }
        let mut by_name = HashMap::new();
        for entry in modules.values().flatten() {
            by_name.insert(entry.name.clone(), entry.clone());
            if let Some(wire) = entry.definition["name"].as_str() {
                by_name.insert(wire.to_string(), entry.clone());
            }
        }
        RemoteTools { modules, by_name }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Callbacks, NoCallbacks, NoLedger, Registry, ToolError};
    use async_trait::async_trait;

    struct Echo;

    #[async_trait]
    impl ToolHandler for Echo {
        async fn call(
            &self,
            args: Value,
            _ctx: &ToolContext,
            _callbacks: &dyn Callbacks,
        ) -> Result<Value, ToolError> {
            Ok(args)
        }
    }

    fn tool(module: &str, name: &str, permission: Permission) -> RemoteTool {
        RemoteTool {
            module: module.into(),
            name: name.into(),
            description: format!("{name} does things."),
            summary: format!("{name} does things"),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
            permission,
            hints: AnnotationHints::DERIVED,
            timeout: Duration::from_secs(1),
            source: format!("module {module}: test"),
            handler: Arc::new(Echo),
        }
    }

    fn entry(module: &str, name: &str) -> ToolEntry {
        ToolEntry::remote(tool(module, name, Permission::Guest)).unwrap()
    }

    #[test]
    fn a_remote_tool_is_checked_and_named_both_ways() {
        let e = entry("crm", "contacts.lookup");
        assert_eq!(e.name, "crm.contacts.lookup");
        assert_eq!(e.definition["name"], "crm__contacts_lookup");
        assert_eq!(e.meta.category, Category::Module);
        assert!(e.meta.requires_gate);
        // Rule 6: somebody else's service, unless the manifest says otherwise.
        assert!(!e.annotations.read_only && e.annotations.open_world);
        assert!(!e.annotations.idempotent && !e.annotations.destructive);
        assert!(!e.annotations.requires_confirmation);

        let refused = |t: RemoteTool, words: &str| {
            let err = ToolEntry::remote(t).unwrap_err();
            assert!(err.contains(words), "{err}");
        };
        refused(
            tool("Bad", "x", Permission::Guest),
            "not a valid module name",
        );
        refused(tool("crm", "", Permission::Guest), "must be non-empty");
        refused(tool("crm", "a b", Permission::Guest), "without spaces");
        refused(tool("crm", &"x".repeat(60), Permission::Guest), "too long");
        let mut t = tool("crm", "x", Permission::Guest);
        t.parameters = json!({"type": "string"});
        refused(t, "\"type\": \"object\"");
        let mut t = tool("crm", "x", Permission::Guest);
        t.parameters = json!({"type": "object", "properties": {"q": {"type": "nonsense"}}});
        refused(t, "not valid JSON Schema");
        let mut t = tool("crm", "x", Permission::Guest);
        t.hints.read_only = Some(true);
        t.hints.destructive = Some(true);
        refused(t, "both read-only and destructive");
    }

    #[tokio::test]
    async fn modules_are_installed_whole_offered_by_profile_and_run() {
        let registry = Registry::build(Vec::new(), Vec::new(), Arc::new(NoLedger)).unwrap();
        let skipped = registry.set_module_tools(
            "crm",
            vec![
                entry("crm", "lookup"),
                entry("crm", "lookup"),
                entry("geo", "where"),
                ToolEntry::remote(tool("crm", "export", Permission::Admin)).unwrap(),
            ],
        );
        assert_eq!(
            skipped,
            [
                "crm.lookup: the name is taken by crm.lookup of the same module",
                "geo.where: not a tool of module crm",
            ]
        );
        assert_eq!(
            registry.get("crm__lookup").map(|e| e.name.clone()),
            Some("crm.lookup".to_string())
        );
        let names = |ctx: &ToolContext| -> Vec<String> {
            registry
                .available_entries(ctx)
                .iter()
                .map(|e| e.name.clone())
                .collect()
        };
        let user = ToolContext::new(uuid::Uuid::nil(), None, Permission::User);
        assert_eq!(names(&user), ["crm.lookup"], "export needs admin");
        let admin = ToolContext::new(uuid::Uuid::nil(), None, Permission::Admin);
        assert_eq!(names(&admin), ["crm.export", "crm.lookup"]);
        // An allow-list allows no module until its modules name one.
        let listed = user.clone().with_allow_list("explore", Arc::from([]));
        assert!(names(&listed).is_empty());
        assert!(names(&listed.clone().with_modules(Arc::from(["geo".to_string()]))).is_empty());
        assert_eq!(
            names(&listed.clone().with_modules(Arc::from(["crm".to_string()]))),
            ["crm.lookup"]
        );
        assert_eq!(
            names(&listed.with_modules(Arc::from(["*".to_string()]))),
            ["crm.lookup"]
        );

        // A call goes through the pipeline: the manifest's schema first.
        let bad = registry
            .execute_tool("crm__lookup", json!({}), &user, &NoCallbacks)
            .await;
        assert_eq!(bad.error.unwrap().code, crate::ErrorCode::InvalidArguments);
        let ok = registry
            .execute_tool("crm.lookup", json!({"q": "ada"}), &user, &NoCallbacks)
            .await;
        assert!(ok.success, "{ok:?}");
        assert_eq!(ok.tool, "crm.lookup");
        assert_eq!(ok.data, Some(json!({"q": "ada"})));

        // A new manifest replaces the module's tools; none removes them.
        registry.set_module_tools("crm", vec![entry("crm", "merge")]);
        assert_eq!(names(&admin), ["crm.merge"]);
        assert!(registry.get("crm.lookup").is_none());
        registry.set_module_tools("crm", Vec::new());
        assert!(names(&admin).is_empty());
        assert!(registry.module_tools("crm").is_empty());
    }
}
