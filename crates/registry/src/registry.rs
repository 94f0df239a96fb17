//! The registry built at start-up, what it offers (`offered`,
//! `get_available_tools`) and `execute_tool`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{Value, json};

use crate::approval::{Approval, ApprovalRequest, Approver};
use crate::discovery::{
    self, DESCRIBE_TOOL, EXECUTE_TOOL, META_ANNOTATIONS, OfferedTool, SEARCH_TOOLS,
};
use crate::entry::{AsksFn, DefinitionFile, HandlerEntry, ToolHandler, ToolMeta};
use crate::gate::{GATE_TIMEOUT, Gate, GateCall, GateDecision, GateVerdict};
use crate::ledger::{AuditRecord, Ledger, LedgerError};
use crate::profile::{self, AgentProfile};
use crate::remote::RemoteTools;
use crate::suggest::close_names;
use crate::tag::{self, Tag};
use crate::{
    Annotations, Callbacks, Category, Deployment, ErrorCode, RateLimits, ToolContext, ToolError,
    ToolEvent, ToolResult,
};

/// What `Registry::limit` asks of the ledger.
#[derive(Clone, Copy)]
enum Limit {
    /// Whether the call is within its limits now, counting nothing.
    Check,
    /// Count the call, or refuse it.
    Count,
}

/// A definition joined with its handler.
pub struct ToolEntry {
    pub name: String,
    /// The OpenAI function object: name, description, parameters. Shared:
    /// every run offering the tool holds it, none copies it.
    pub definition: Arc<Value>,
    pub definition_file: String,
    pub handler_file: &'static str,
    pub meta: ToolMeta,
    /// One line for listings and the system prompt: the metadata's
    /// `short_description`, or a remote tool's from its manifest.
    pub summary: Cow<'static, str>,
    /// The remote module that runs it; `None` for the server's own tools.
    pub module: Option<String>,
    /// The metadata's annotation hints with the rules applied.
    pub annotations: Annotations,
    pub available: fn(&ToolContext) -> bool,
    /// Adjusts the definition to what a context can do (see
    /// `HandlerEntry::shape`).
    pub shape: Option<fn(&mut Value, &ToolContext)>,
    /// The tool's own rule for asking a person (see `HandlerEntry::asks`).
    pub asks: Option<AsksFn>,
    pub args_schema: Value,
    /// The tool's one-line form for models without function calling,
    /// checked and compiled at start-up.
    pub tag: Option<Tag>,
    pub(crate) handler: Arc<dyn ToolHandler>,
    pub(crate) validator: jsonschema::Validator,
}

impl std::fmt::Debug for ToolEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolEntry")
            .field("name", &self.name)
            .field("definition_file", &self.definition_file)
            .field("handler_file", &self.handler_file)
            .finish_non_exhaustive()
    }
}

impl ToolEntry {
    /// Whether the tool appears for `ctx`: its predicate, the allow-list and
    /// the caller's permission all agree.
    pub fn is_offered(&self, ctx: &ToolContext) -> bool {
        (self.available)(ctx) && ctx.allows(&self.name) && ctx.permission >= self.meta.permission
    }

    /// The entry in OpenAI's `tools` format.
    pub fn openai_tool(&self) -> Value {
        json!({ "type": "function", "function": *self.definition })
    }

    /// The definition as offered in `ctx` (the tool may narrow it to what
    /// the deployment can do, such as search modes without embeddings): the
    /// shared one unless the tool shapes it.
    pub fn definition_for(&self, ctx: &ToolContext) -> Arc<Value> {
        let Some(shape) = self.shape else {
            return self.definition.clone();
        };
        let mut definition = Value::clone(&self.definition);
        shape(&mut definition, ctx);
        // Most contexts leave it as it is: a run then holds the shared one.
        if definition == *self.definition {
            self.definition.clone()
        } else {
            Arc::new(definition)
        }
    }

    /// The metadata as listings show it: `ToolMeta` with the effective
    /// annotations in place of the stated hints.
    pub fn metadata(&self) -> Value {
        let mut meta = serde_json::to_value(&self.meta).unwrap_or_default();
        meta["annotations"] = json!(self.annotations);
        meta["short_description"] = json!(self.summary);
        if let Some(module) = &self.module {
            meta["module"] = json!(module);
        }
        meta
    }

    /// [`ToolEntry::openai_tool`] as offered in `ctx`.
    pub fn openai_tool_for(&self, ctx: &ToolContext) -> Value {
        json!({ "type": "function", "function": *self.definition_for(ctx) })
    }
}

/// The registry could not be built; every problem is listed, each naming its file.
#[derive(Debug, thiserror::Error)]
#[error("the tool registry is inconsistent:\n  - {}", .problems.join("\n  - "))]
pub struct RegistryError {
    pub problems: Vec<String>,
}

/// A discovery meta-tool's definition, checked like a tool's.
struct MetaTool {
    name: &'static str,
    definition: Arc<Value>,
    validator: jsonschema::Validator,
}

/// What a call resolves to before it runs.
enum Plan {
    /// A real tool, through the whole pipeline.
    Run(Arc<ToolEntry>),
    /// An answer the registry gives itself: a meta-tool's, or a refusal.
    Answer(Result<Value, ToolError>),
}

/// The single source of truth for which tools exist.
pub struct Registry {
    tools: Vec<Arc<ToolEntry>>,
    /// Remote modules' tools as last discovered, swapped whole.
    remote: RwLock<Arc<RemoteTools>>,
    /// search_tools, describe_tool and execute_tool, in [`META_TOOLS`] order.
    meta_tools: Vec<MetaTool>,
    by_name: HashMap<String, usize>,
    profiles: BTreeMap<String, AgentProfile>,
    ledger: Arc<dyn Ledger>,
    approver: Option<Arc<dyn Approver>>,
    gate: Option<Arc<dyn Gate>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

const DEFINITION_KEYS: &[&str] = &["name", "description", "parameters", "strict"];

/// Checks a definition's shape; returns (name, parameters validator).
fn check_definition(def: &DefinitionFile) -> Result<(Value, jsonschema::Validator), String> {
    let file = &def.file;
    let value: Value =
        serde_json::from_str(&def.text).map_err(|e| format!("{file}: not valid JSON: {e}"))?;
    let obj = value
        .as_object()
        .ok_or_else(|| format!("{file}: must be a JSON object"))?;
    if let Some(key) = obj.keys().find(|k| !DEFINITION_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "{file}: unknown key {key:?} (allowed: {})",
            DEFINITION_KEYS.join(", ")
        ));
    }
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{file}: \"name\" must be a string"))?;
    let valid_name = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        return Err(format!(
            "{file}: tool name {name:?} must be 1-64 characters of a-z, A-Z, 0-9, _ or -"
        ));
    }
    let stem = std::path::Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if stem != name {
        return Err(format!(
            "{file}: the file must be named after its tool ({name}.json)"
        ));
    }
    match obj.get("description").and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() => {}
        _ => {
            return Err(format!(
                "{file}: \"description\" must be a non-empty string"
            ));
        }
    }
    let params = obj
        .get("parameters")
        .ok_or_else(|| format!("{file}: \"parameters\" is missing"))?;
    if params.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!(
            "{file}: \"parameters\" must be a JSON Schema with \"type\": \"object\""
        ));
    }
    let properties = params
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{file}: \"parameters.properties\" must be an object"))?;
    if params.get("additionalProperties") != Some(&Value::Bool(false)) {
        return Err(format!(
            "{file}: \"parameters.additionalProperties\" must be false so misspelt arguments are refused"
        ));
    }
    for (prop, schema) in properties {
        if schema.get("description").and_then(Value::as_str).is_none() {
            return Err(format!(
                "{file}: parameter {prop:?} has no description (the model reads it)"
            ));
        }
    }
    if let Some(required) = params.get("required") {
        let required = required
            .as_array()
            .ok_or_else(|| format!("{file}: \"parameters.required\" must be an array"))?;
        for r in required {
            let r = r.as_str().unwrap_or_default();
            if !properties.contains_key(r) {
                return Err(format!(
                    "{file}: required parameter {r:?} is not among the properties"
                ));
            }
        }
    }
    jsonschema::meta::validate(params)
        .map_err(|e| format!("{file}: \"parameters\" is not valid JSON Schema: {e}"))?;
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(params)
        .map_err(|e| format!("{file}: \"parameters\" cannot be compiled: {e}"))?;
    Ok((value, validator))
}

impl Registry {
    /// Joins definitions with handlers and reads the agent profiles (files
    /// under an `agents/` folder among `definitions`). Any definition
    /// without a handler, handler without a definition, duplicate name or
    /// alias, invalid definition, contradictory annotations, tag that does
    /// not fit its definition or repeats another tool's prefix, or profile
    /// naming an unknown tool or category is an error that names the files.
    pub fn build(
        definitions: Vec<DefinitionFile>,
        handlers: Vec<HandlerEntry>,
        ledger: Arc<dyn Ledger>,
    ) -> Result<Registry, RegistryError> {
        let mut problems = Vec::new();
        let (profile_files, definitions): (Vec<DefinitionFile>, Vec<DefinitionFile>) =
            definitions.into_iter().partition(is_profile_file);
        let mut defs: BTreeMap<String, (Value, jsonschema::Validator, String)> = BTreeMap::new();
        // Files that failed their checks, by stem: a handler of that name has
        // a definition, only not a usable one, and is told so.
        let mut invalid: HashMap<String, String> = HashMap::new();
        for def in &definitions {
            match check_definition(def) {
                Ok((value, validator)) => {
                    let name = value["name"].as_str().unwrap_or_default().to_string();
                    if let Some((_, _, first)) = defs.get(&name) {
                        problems.push(format!(
                            "two definitions name the tool {name}: {first} and {}",
                            def.file
                        ));
                    } else {
                        defs.insert(name, (value, validator, def.file.clone()));
                    }
                }
                Err(problem) => {
                    let stem = std::path::Path::new(&def.file)
                        .file_stem()
                        .and_then(|s| s.to_str())
                        .unwrap_or_default()
                        .to_string();
                    invalid.insert(stem, def.file.clone());
                    problems.push(problem);
                }
            }
        }
        let mut seen_handlers: HashMap<&str, &str> = HashMap::new();
        for h in &handlers {
            if let Some(first) = seen_handlers.insert(h.name, h.file) {
                problems.push(format!(
                    "two handlers name the tool {}: {first} and {}",
                    h.name, h.file
                ));
            }
        }
        for h in &handlers {
            if defs.contains_key(h.name) {
                continue;
            }
            match invalid.get(h.name) {
                Some(file) => problems.push(format!(
                    "handler {} has no usable definition: {file} is invalid (see above)",
                    h.file
                )),
                None => problems.push(format!(
                    "handler {} has no definition (expected definitions/{}.json)",
                    h.file, h.name
                )),
            }
        }
        for (name, (_, _, file)) in &defs {
            if !seen_handlers.contains_key(name.as_str()) {
                problems.push(format!(
                    "definition {file} has no handler (expected handlers/src/{name}.rs, listed in handlers::all())"
                ));
            }
        }

        let mut tools = Vec::new();
        let mut handlers = handlers;
        handlers.sort_by_key(|h| h.name);
        for h in handlers {
            let Some((definition, validator, file)) = defs.remove(h.name) else {
                continue;
            };
            let annotations = Annotations::derive(h.meta.category, h.meta.annotations);
            if annotations.read_only && annotations.destructive {
                problems.push(format!(
                    "{}: a tool cannot be both read-only and destructive",
                    h.file
                ));
            }
            if META_TOOLS.contains(&h.name) {
                problems.push(format!(
                    "{}: {} is the name of a discovery meta-tool",
                    h.file, h.name
                ));
            }
            let tag = h.meta.tag.and_then(|spec| {
                Tag::compile(spec, &definition["parameters"])
                    .map_err(|tag_problems| {
                        problems
                            .extend(tag_problems.into_iter().map(|p| format!("{}: {p}", h.file)))
                    })
                    .ok()
            });
            if let Some(tag) = &tag
                && let Some(other) = tools.iter().find(|t: &&ToolEntry| {
                    t.tag.as_ref().is_some_and(|o| o.prefix() == tag.prefix())
                })
            {
                problems.push(format!(
                    "{}: tag prefix {} is already the tag of {} ({})",
                    h.file,
                    tag.prefix(),
                    other.name,
                    other.handler_file
                ));
            }
            tools.push(ToolEntry {
                name: h.name.to_string(),
                definition: Arc::new(definition),
                definition_file: file,
                handler_file: h.file,
                summary: Cow::Borrowed(h.meta.short_description),
                module: None,
                meta: h.meta,
                annotations,
                available: h.available,
                shape: h.shape,
                asks: h.asks,
                args_schema: h.args_schema,
                tag,
                handler: h.handler,
                validator,
            });
        }
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for (i, t) in tools.iter().enumerate() {
            by_name.insert(t.name.clone(), i);
        }
        for (i, t) in tools.iter().enumerate() {
            for alias in t.meta.aliases {
                if let Some(&other) = by_name.get(*alias) {
                    if other != i {
                        problems.push(format!(
                            "alias {alias:?} of {} ({}) clashes with {}",
                            t.name, t.handler_file, tools[other].name
                        ));
                    }
                    continue;
                }
                by_name.insert((*alias).to_string(), i);
            }
        }
        let categories: BTreeMap<String, Category> = tools
            .iter()
            .map(|t| (t.name.clone(), t.meta.category))
            .collect();
        let profile_files: Vec<(String, String)> = profile_files
            .into_iter()
            .map(|f| (f.file, f.text))
            .collect();
        let profiles = profile::load(&profile_files, &categories, &mut problems);
        let mut meta_tools = Vec::new();
        // Checked like a tool's file, so a definition that does not name
        // its meta-tool (the file's stem) is refused here too.
        for (name, file) in discovery::definition_files() {
            match check_definition(&file) {
                Ok((definition, validator)) => meta_tools.push(MetaTool {
                    name,
                    definition: Arc::new(definition),
                    validator,
                }),
                Err(problem) => problems.push(problem),
            }
        }
        if !problems.is_empty() {
            return Err(RegistryError { problems });
        }
        Ok(Registry {
            tools: tools.into_iter().map(Arc::new).collect(),
            remote: RwLock::default(),
            meta_tools,
            by_name,
            profiles,
            ledger,
            approver: None,
            gate: None,
        })
    }

    /// Lets `approver` decide the calls of tools that require confirmation
    /// (without one, they are refused with `approval_required`).
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Asks `gate` before every call of a tool whose metadata says
    /// `requires_gate` (without one, every call runs).
    pub fn with_gate(mut self, gate: Arc<dyn Gate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Every agent profile, by name.
    pub fn profiles(&self) -> &BTreeMap<String, AgentProfile> {
        &self.profiles
    }

    /// A profile by name.
    pub fn profile(&self, name: &str) -> Option<&AgentProfile> {
        self.profiles.get(name)
    }

    /// `ctx` under profile `name`: its tools for `ctx.deployment` as the
    /// allow-list, and its discovery and tool-mode defaults.
    pub fn with_profile(&self, ctx: ToolContext, name: &str) -> Result<ToolContext, String> {
        let profile = self.known_profile(name)?;
        let tools = profile.tools_for(ctx.deployment);
        let mut ctx = ctx
            .with_allow_list(name, tools)
            .with_modules(profile.modules());
        ctx.tool_search = profile.spec.tool_search;
        ctx.tool_mode = profile.spec.tool_mode;
        Ok(ctx)
    }

    /// A profile by name, or the error that lists the known ones.
    fn known_profile(&self, name: &str) -> Result<&AgentProfile, String> {
        self.profiles.get(name).ok_or_else(|| {
            format!(
                "unknown agent profile {name:?}; known profiles: {}",
                self.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// The tools profile `name` allows in `deployment`; an unknown name is
    /// an error that lists the known ones.
    pub fn resolve_profile(
        &self,
        name: &str,
        deployment: Deployment,
    ) -> Result<Arc<[String]>, String> {
        self.known_profile(name).map(|p| p.tools_for(deployment))
    }

    /// Every tool: the server's own alphabetically, then the remote
    /// modules' tools, by module and name.
    pub fn tools(&self) -> Vec<Arc<ToolEntry>> {
        let mut tools = self.tools.clone();
        tools.extend(self.remote().modules.values().flatten().cloned());
        tools
    }

    /// The server's own tools, alphabetically.
    pub fn local_tools(&self) -> &[Arc<ToolEntry>] {
        &self.tools
    }

    /// A tool by name or alias; a remote tool by `module.tool` or by the
    /// name models see (`module__tool`).
    pub fn get(&self, name: &str) -> Option<Arc<ToolEntry>> {
        match self.by_name.get(name) {
            Some(&i) => Some(self.tools[i].clone()),
            None => self.remote().by_name.get(name).cloned(),
        }
    }

    /// The remote tools as they stand.
    fn remote(&self) -> Arc<RemoteTools> {
        self.remote
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The tools of remote module `module`, as last installed.
    pub fn module_tools(&self, module: &str) -> Vec<Arc<ToolEntry>> {
        self.remote()
            .modules
            .get(module)
            .cloned()
            .unwrap_or_default()
    }

    /// Installs `tools` as everything remote module `module` offers,
    /// replacing what it offered before (none: it offers nothing now).
    /// A tool that is not the module's (`module.` must prefix it) or whose
    /// name, or the name models see, is taken by one of the server's own
    /// tools or aliases, by another module's tool, or by an earlier tool of
    /// the list, is left out; the answer says why for each.
    pub fn set_module_tools(&self, module: &str, tools: Vec<ToolEntry>) -> Vec<String> {
        let mut skipped = Vec::new();
        let mut kept: Vec<Arc<ToolEntry>> = Vec::new();
        let prefix = format!("{module}.");
        // Another module's tool under the same name models see (module
        // `a` tool `_b` and module `a_` tool `b` would both be `a___b`).
        // Under the write lock, so two modules installed at once cannot both
        // take a name.
        let mut remote = self.remote.write().unwrap_or_else(PoisonError::into_inner);
        let others = remote.clone();
        let elsewhere = |name: &str| {
            others
                .by_name
                .get(name)
                .filter(|e| e.module.as_deref() != Some(module))
                .map(|e| e.name.clone())
        };
        for entry in tools {
            let wire = entry.definition["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let clash = [entry.name.as_str(), wire.as_str()]
                .into_iter()
                .find(|n| self.by_name.contains_key(*n) || META_TOOLS.contains(n));
            if entry.module.as_deref() != Some(module) || !entry.name.starts_with(&prefix) {
                skipped.push(format!("{}: not a tool of module {module}", entry.name));
            } else if let Some(name) = clash {
                skipped.push(format!(
                    "{}: {name} is the name of one of the server's own tools",
                    entry.name
                ));
            } else if let Some(other) = elsewhere(&wire) {
                skipped.push(format!(
                    "{}: the name models see, {wire}, is taken by {other}",
                    entry.name
                ));
            } else if let Some(first) = kept.iter().find(|k| {
                k.name == entry.name || k.definition["name"].as_str() == Some(wire.as_str())
            }) {
                skipped.push(format!(
                    "{}: the name is taken by {} of the same module",
                    entry.name, first.name
                ));
            } else {
                kept.push(Arc::new(entry));
            }
        }
        kept.sort_by(|a, b| a.name.cmp(&b.name));
        *remote = Arc::new(remote.with_module(module, kept));
        skipped
    }

    /// The tools offered up front in `ctx`, in OpenAI's `tools` format:
    /// what every door lists and the agent sends the model (see
    /// [`Registry::offered`]).
    pub fn get_available_tools(&self, ctx: &ToolContext) -> Vec<Value> {
        self.offered(ctx)
            .iter()
            .map(OfferedTool::openai_tool)
            .collect()
    }

    /// The tools a model is offered up front in `ctx`. With
    /// `ctx.tool_search`, only the discovery meta-tools; otherwise the real
    /// tools offered in `ctx` except those that defer loading, followed by
    /// the meta-tools when any does, so that it can still be found.
    pub fn offered(&self, ctx: &ToolContext) -> Vec<OfferedTool> {
        let real = |e: Arc<ToolEntry>| OfferedTool {
            name: e.name.clone(),
            short_description: e.summary.clone(),
            definition: e.definition_for(ctx),
        };
        let meta = self.meta_tools.iter().map(|m| OfferedTool {
            name: m.name.to_string(),
            short_description: Cow::Borrowed(discovery::short_description(m.name)),
            definition: m.definition.clone(),
        });
        if ctx.tool_search {
            return meta.collect();
        }
        let mut offered: Vec<OfferedTool> = self
            .available_entries(ctx)
            .into_iter()
            .filter(|e| !e.meta.defer_loading)
            .map(real)
            .collect();
        if self.discovery(ctx) {
            offered.extend(meta);
        }
        offered
    }

    /// The real tools that may run in `ctx` (whether listed up front or
    /// left to discovery): the server's own, then the remote modules'.
    pub fn available_entries(&self, ctx: &ToolContext) -> Vec<Arc<ToolEntry>> {
        let mut entries: Vec<Arc<ToolEntry>> = self
            .tools
            .iter()
            .filter(|t| t.is_offered(ctx))
            .cloned()
            .collect();
        let remote = self.remote();
        entries.extend(
            remote
                .modules
                .iter()
                .filter(|(module, _)| ctx.allows_module(module))
                .flat_map(|(_, tools)| tools)
                .filter(|t| t.is_offered(ctx))
                .cloned(),
        );
        entries
    }

    /// What a model without function calling is told about the tools
    /// offered in `ctx` that have a tag: one line each (`SEARCH: <query> —
    /// what it does — e.g. SEARCH: vacuum full`), then the rules of the
    /// form. Empty when no offered tool has a tag.
    pub fn prompt_block(&self, ctx: &ToolContext) -> String {
        let entries = self.available_entries(ctx);
        tag::prompt_block(
            entries
                .iter()
                .filter_map(|e| e.tag.as_ref().map(|tag| (tag, e.summary.as_ref()))),
        )
    }

    /// Whether the discovery meta-tools are offered, and answered, in
    /// `ctx`: the caller asked for discovery, or a tool it may use defers
    /// loading. Elsewhere their names are unknown tools.
    pub fn discovery(&self, ctx: &ToolContext) -> bool {
        ctx.tool_search
            || self
                .available_entries(ctx)
                .iter()
                .any(|e| e.meta.defer_loading)
    }

    /// The annotations that hold for the call `name(args)` in `ctx`: the
    /// tool's own, those of the tool an execute_tool call runs, the
    /// meta-tools' (read-only, idempotent) for search_tools and
    /// describe_tool; `None` for a call that names no tool it could run.
    /// The agent decides by them what may run concurrently.
    pub fn call_annotations(
        &self,
        name: &str,
        args: &Value,
        ctx: &ToolContext,
    ) -> Option<Annotations> {
        if META_TOOLS.contains(&name) && self.discovery(ctx) {
            if name != EXECUTE_TOOL {
                return Some(META_ANNOTATIONS);
            }
            return args["name"]
                .as_str()
                .and_then(|target| self.offered_entry(target, ctx))
                .map(|e| e.annotations);
        }
        self.get(name).map(|e| e.annotations)
    }

    /// A real tool by name or alias, when it is offered in `ctx`.
    fn offered_entry(&self, name: &str, ctx: &ToolContext) -> Option<Arc<ToolEntry>> {
        self.get(name).filter(|e| e.is_offered(ctx))
    }

    /// Runs one call through the whole pipeline. Never panics and never
    /// fails outside the returned [`ToolResult`].
    ///
    /// Where discovery is on ([`Registry::discovery`]), the meta-tools are
    /// answered here, limited to the tools offered in `ctx`; an
    /// execute_tool call runs its tool as if the tool had been called by
    /// name (its events, audit record and result carry the tool's name and
    /// the call's id), and one the tool cannot take is refused like any
    /// call of that tool.
    pub async fn execute_tool(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
    ) -> ToolResult {
        if let Some(meta) = self
            .meta_tools
            .iter()
            .find(|m| m.name == name)
            .filter(|_| self.discovery(ctx))
        {
            let (name, plan, args) = self.plan_meta(meta, args, ctx);
            return self.stamped(&name, plan, args, ctx, callbacks).await;
        }
        let plan = match self.get(name) {
            Some(entry) => Plan::Run(entry),
            None => Plan::Answer(Err(self.unknown_tool(name, ctx))),
        };
        self.stamped(name, plan, args, ctx, callbacks).await
    }

    /// [`Registry::execute_tool`] with its events handed to `forward` as the
    /// call reports them (its `tool_call`, a sub-agent's events, approval
    /// requests, its `tool_result`), through the one pump,
    /// [`crate::forward_events`]. `None` when `forward` answered false (its
    /// reader went away) and the call was stopped.
    pub async fn execute_streaming<Sent>(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
        forward: impl FnMut(ToolEvent) -> Sent,
    ) -> Option<ToolResult>
    where
        Sent: Future<Output = bool>,
    {
        let (callbacks, events) = crate::ChannelCallbacks::new();
        let call = self.execute_tool(name, args, ctx, &callbacks);
        crate::forward_events(call, events, forward).await
    }

    /// What a meta-tool call comes to: the name it is recorded under, what
    /// to do, and the arguments recorded. search_tools and describe_tool
    /// are answered here; execute_tool becomes a call of the tool it names
    /// (with that tool's arguments), or of an unknown tool when `ctx` does
    /// not offer it: discovery never reveals a tool the context may not use.
    fn plan_meta(&self, meta: &MetaTool, args: Value, ctx: &ToolContext) -> (String, Plan, Value) {
        let args = match args {
            Value::Null => Value::Object(Default::default()),
            other => other,
        };
        let refused =
            |error: ToolError, args: Value| (meta.name.to_string(), Plan::Answer(Err(error)), args);
        if let Err(error) = check_arguments(meta.name, &meta.validator, &args) {
            return refused(error, args);
        }
        let named = args["name"].as_str().unwrap_or_default().to_string();
        let answer = match meta.name {
            SEARCH_TOOLS => {
                let (query, limit) = discovery::search_arguments(&args);
                let offered = self.available_entries(ctx);
                Ok(discovery::search(query, limit, &offered, ctx))
            }
            DESCRIBE_TOOL => match self.offered_entry(&named, ctx) {
                Some(entry) => Ok(discovery::describe(&entry, ctx)),
                None => Err(self.unknown_tool(&named, ctx)),
            },
            _ if META_TOOLS.contains(&named.as_str()) => {
                let error = ToolError::invalid(format!(
                    "execute_tool runs the tools search_tools finds, not {named}; call {named} directly"
                ));
                return refused(error, args);
            }
            _ => {
                let arguments = args.get("arguments").cloned().unwrap_or(Value::Null);
                let plan = match self.offered_entry(&named, ctx) {
                    Some(entry) => Plan::Run(entry),
                    None => Plan::Answer(Err(self.unknown_tool(&named, ctx))),
                };
                return (named, plan, arguments);
            }
        };
        (meta.name.to_string(), Plan::Answer(answer), args)
    }

    /// Carries out `plan` for a call named `name` (a real tool's name,
    /// an alias, a meta-tool's or an unknown name) with the `tool_call`
    /// event before, and the audit record and `tool_result` event after.
    async fn stamped(
        &self,
        name: &str,
        plan: Plan,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
    ) -> ToolResult {
        let started = Instant::now();
        let ts = chrono::Utc::now();
        let call_id = ctx
            .call_id
            .clone()
            .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
        let module = match &plan {
            Plan::Run(entry) => entry.module.clone(),
            Plan::Answer(_) => None,
        };
        let (tool_name, annotations) = match &plan {
            Plan::Run(entry) => (entry.name.clone(), Some(entry.annotations)),
            // execute_tool takes its target's annotations; refused, it has none.
            Plan::Answer(_) if META_TOOLS.contains(&name) && name != EXECUTE_TOOL => {
                (name.to_string(), Some(META_ANNOTATIONS))
            }
            Plan::Answer(_) => (name.to_string(), None),
        };
        callbacks.emit(ToolEvent::ToolCall {
            call_id: call_id.clone(),
            name: tool_name.clone(),
            arguments: args.clone(),
        });

        let side_effects = crate::SideEffects::default();
        let mut trace = Trace::default();
        let outcome = match plan {
            Plan::Answer(answer) => answer,
            Plan::Run(entry) => {
                let mut ctx = ctx.clone();
                ctx.call_id = Some(call_id.clone());
                ctx.side_effects = side_effects.clone();
                self.run(&entry, &args, &ctx, callbacks, &mut trace).await
            }
        };
        let gate = trace.gate.map(GateVerdict::as_str);
        let attempts = trace.attempts.max(1);
        let duration_ms = started.elapsed().as_millis() as u64;
        let mut result = match &outcome {
            Ok(data) => ToolResult::ok(&tool_name, &call_id, data.clone(), duration_ms),
            Err(e) => ToolResult::failed(&tool_name, &call_id, e, duration_ms),
        };
        result.side_effects = side_effects.take();
        result.attempts = attempts;
        let flags = annotations.map(|a| a.flags()).unwrap_or_default();
        let agent = ctx.agent.as_deref().unwrap_or("");
        match &outcome {
            Ok(_) => {
                tracing::debug!(tool = %tool_name, %call_id, duration_ms, annotations = %flags, agent, gate, attempts, side_effects = ?result.side_effects, "tool call succeeded")
            }
            Err(e) => {
                tracing::info!(tool = %tool_name, %call_id, duration_ms, annotations = %flags, agent, gate, attempts, code = ?e.code, error = %e.message, "tool call failed")
            }
        }
        let record = AuditRecord {
            tool: tool_name.clone(),
            call_id: call_id.clone(),
            duration_ms,
            ts,
            user_id: ctx.user_id,
            space_id: ctx.space_id,
            request_id: ctx.request_id.clone(),
            parent_call_id: ctx.parent_call_id.clone(),
            success: result.success,
            error: result.error.as_ref().map(|e| e.message.clone()),
            args,
            annotations,
            side_effects: result.side_effects.clone(),
            gate: gate.map(str::to_string),
            agent: ctx.agent.as_deref().map(str::to_string),
            module,
            attempts,
        };
        if let Err(e) = self.ledger.record(record).await {
            tracing::warn!(tool = %tool_name, %call_id, error = %e, "could not write the audit record");
        }
        callbacks.emit(ToolEvent::ToolResult {
            call_id,
            name: tool_name,
            result: result.clone(),
        });
        result
    }

    fn unknown_tool(&self, name: &str, ctx: &ToolContext) -> ToolError {
        let entries = self.available_entries(ctx);
        let offered: Vec<&str> = entries.iter().map(|t| t.name.as_str()).collect();
        // Every name that reaches an offered tool (aliases included), with
        // the tool it reaches.
        let mut names: Vec<(&str, &str)> = self
            .by_name
            .iter()
            .filter(|(_, i)| self.tools[**i].is_offered(ctx))
            .map(|(n, &i)| (n.as_str(), self.tools[i].name.as_str()))
            .collect();
        names.extend(
            entries
                .iter()
                .filter(|e| e.module.is_some())
                .map(|e| (e.name.as_str(), e.name.as_str())),
        );
        // An alias and its tool may both look close; name the tool once.
        let mut close: Vec<&str> = Vec::new();
        for n in close_names(name, names.iter().map(|(n, _)| *n)) {
            let tool = names.iter().find(|(a, _)| *a == n).map_or(n, |(_, t)| *t);
            if !close.contains(&tool) {
                close.push(tool);
            }
        }
        let message = if close.is_empty() {
            format!(
                "unknown tool {name:?}; available tools: {}",
                offered.join(", ")
            )
        } else {
            format!(
                "unknown tool {name:?}; did you mean {}?",
                close
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )
        };
        ToolError::new(ErrorCode::UnknownTool, message)
    }

    /// The pipeline after the name is resolved. `trace` receives the gate
    /// step's verdict when the call reached it, and how often the handler
    /// ran, for the audit record and the result.
    async fn run(
        &self,
        entry: &ToolEntry,
        args: &Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
        trace: &mut Trace,
    ) -> Result<Value, ToolError> {
        let name = entry.name.as_str();
        if !(entry.available)(ctx) || !ctx.allows(name) {
            let why = if ctx.allows(name) {
                format!("it is offered only when {}", entry.meta.available_when)
            } else {
                "this agent may not use it".to_string()
            };
            return Err(ToolError::new(
                ErrorCode::NotAvailable,
                format!("tool {name} is not available here: {why}"),
            ));
        }
        let mut args = match args {
            Value::Null => Value::Object(Default::default()),
            other => other.clone(),
        };
        if let Some(document) = ctx.document_scope {
            pin_document(&entry.name, &entry.definition, &mut args, document)?;
        }
        check_arguments(name, &entry.validator, &args)?;
        if ctx.permission < entry.meta.permission {
            return Err(ToolError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "{name} needs permission level {:?} or above; the caller has {:?}",
                    entry.meta.permission, ctx.permission
                )
                .to_lowercase(),
            ));
        }
        // A call counts against its rate limit when it runs: one the gate
        // blocks or a person denies is not counted. One over its limit is
        // refused before the gate is consulted or anyone is asked, by a
        // check that counts nothing.
        let limits = ctx.rate_limits(name, entry.meta.limits);
        let limited = !limits.is_none();
        let mut checked = false;
        // The gate judges the call (`consult_gate`'s own condition).
        if limited && self.gate.is_some() && entry.meta.requires_gate {
            self.limit(ctx, name, &limits, Limit::Check).await?;
            checked = true;
        }
        // Why a person must approve the call first: what refuses it when
        // nobody can answer (annotations, the gate), then what only asks
        // where someone can (an admin's rules, the tool itself).
        // (why, for the person; the refusal when nobody can answer)
        let mut must_ask: Option<(String, String)> = None;
        let nobody =
            format!("{name} needs a person's approval before it runs, and nobody can give it here");
        if let Some((verdict, refusal)) = self.consult_gate(entry, &args, ctx).await {
            trace.gate = Some(verdict);
            match refusal {
                Ok(()) => {}
                Err(GateRefusal::Ask(reason)) => {
                    must_ask = Some((
                        format!("the gate asks: {reason}"),
                        format!("{nobody}: {reason}"),
                    ));
                }
                Err(GateRefusal::Refused(e)) => return Err(e),
            }
        }
        if must_ask.is_none() && entry.annotations.requires_confirmation {
            must_ask = Some((
                format!("{name} is marked as requiring confirmation"),
                nobody,
            ));
        }
        let approver = ctx.approver.as_ref().or(self.approver.as_ref());
        let Some(approver) = approver else {
            if let Some((_, refusal)) = must_ask {
                return Err(ToolError::new(ErrorCode::ApprovalRequired, refusal));
            }
            if limited {
                self.limit(ctx, name, &limits, Limit::Count).await?;
            }
            return self.attempt(entry, args, ctx, callbacks, trace).await;
        };
        let why = must_ask
            .map(|(why, _)| why)
            .or_else(|| ctx.settings.approvals.why(entry))
            .or_else(|| entry.asks.and_then(|asks| asks(&args, ctx)));
        if let Some(why) = why {
            if limited && !checked {
                self.limit(ctx, name, &limits, Limit::Check).await?;
            }
            let request = ApprovalRequest {
                entry,
                args: &args,
                ctx,
                why: &why,
                callbacks,
            };
            match approver.approve(request).await {
                Approval::Approved => {}
                Approval::Denied { reason } => {
                    return Err(ToolError::new(
                        ErrorCode::ApprovalRequired,
                        format!("{name} was not approved: {reason}"),
                    ));
                }
            }
        }
        // Counted now, just before it runs: a call approved while another
        // took the day's last one is refused here, so the limit holds.
        if limited {
            self.limit(ctx, name, &limits, Limit::Count).await?;
        }
        self.attempt(entry, args, ctx, callbacks, trace).await
    }

    /// The handler, run once more after [`RETRY_PAUSE`] when the context
    /// asks for it (`retry_once`), the failure is transient, and running
    /// the tool twice does no more than running it once (idempotent). A
    /// remote module's client has retried what a retry may fix already.
    /// Both attempts are one call: one `tool_call`, one `tool_result` with
    /// `attempts`, one audit row; the call was checked, judged and counted
    /// once, before the first.
    async fn attempt(
        &self,
        entry: &ToolEntry,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
        trace: &mut Trace,
    ) -> Result<Value, ToolError> {
        trace.attempts = 1;
        let retry = ctx.retry_once && entry.annotations.idempotent && entry.module.is_none();
        if !retry {
            return self.call_handler(entry, args, ctx, callbacks).await;
        }
        match self.call_handler(entry, args.clone(), ctx, callbacks).await {
            Err(e) if e.code.retried_at_once() => {
                tracing::debug!(tool = %entry.name, call_id = ctx.call_id.as_deref().unwrap_or(""), code = ?e.code, "retrying a failed tool call once");
                tokio::time::sleep(RETRY_PAUSE).await;
                trace.attempts = 2;
                self.call_handler(entry, args, ctx, callbacks).await
            }
            outcome => outcome,
        }
    }

    /// Asks the ledger whether the call is within its limits (`Check`,
    /// counting nothing) or counts it (`Count`); a refusal is the call's
    /// `rate_limited` error.
    async fn limit(
        &self,
        ctx: &ToolContext,
        name: &str,
        limits: &RateLimits,
        how: Limit,
    ) -> Result<(), ToolError> {
        let outcome = match how {
            Limit::Check => self.ledger.check(ctx, name, limits).await,
            Limit::Count => self.ledger.admit(ctx, name, limits).await,
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(LedgerError::Refused(r)) => Err(ToolError::new(ErrorCode::RateLimited, r.message)),
            Err(e @ LedgerError::Unavailable(_)) => {
                tracing::warn!(tool = name, error = %e, "rate-limit check failed");
                Err(ToolError::unavailable(format!(
                    "{name} could not check its rate limit; try again shortly"
                )))
            }
        }
    }

    /// The handler, under the tool's timeout, a panic caught.
    async fn call_handler(
        &self,
        entry: &ToolEntry,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        let name = entry.name.as_str();
        let call = AssertUnwindSafe(entry.handler.call(args, ctx, callbacks)).catch_unwind();
        match tokio::time::timeout(entry.meta.timeout, call).await {
            Err(_) => Err(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "{name} did not finish within {} ms",
                    entry.meta.timeout.as_millis()
                ),
            )),
            Ok(Err(_panic)) => {
                tracing::error!(tool = name, "tool handler panicked");
                Err(ToolError::internal(format!(
                    "{name} failed unexpectedly; the error was logged"
                )))
            }
            Ok(Ok(result)) => result,
        }
    }

    /// Asks the gate about a call of a tool that requires it, under
    /// [`GATE_TIMEOUT`]; `None` when the call does not pass a gate. A gate
    /// that fails or is too slow lets the call run (`fail_open`).
    async fn consult_gate(
        &self,
        entry: &ToolEntry,
        args: &Value,
        ctx: &ToolContext,
    ) -> Option<(GateVerdict, Result<(), GateRefusal>)> {
        let gate = self.gate.as_ref().filter(|_| entry.meta.requires_gate)?;
        let name = entry.name.as_str();
        let call = GateCall { entry, args, ctx };
        let call_id = ctx.call_id.as_deref().unwrap_or("");
        let decision = match tokio::time::timeout(GATE_TIMEOUT, gate.check(&call)).await {
            Ok(Ok(decision)) => decision,
            Ok(Err(e)) => {
                tracing::warn!(tool = name, call_id, gate = "fail_open", reason = %e, "the eval gate failed; the call runs");
                return Some((GateVerdict::FailOpen, Ok(())));
            }
            Err(_) => {
                tracing::warn!(
                    tool = name,
                    call_id,
                    gate = "fail_open",
                    reason = "timeout",
                    "the eval gate did not answer within {} ms; the call runs",
                    GATE_TIMEOUT.as_millis()
                );
                return Some((GateVerdict::FailOpen, Ok(())));
            }
        };
        Some(match decision {
            GateDecision::Allow => {
                tracing::debug!(
                    tool = name,
                    call_id,
                    gate = "allow",
                    "the eval gate allowed the call"
                );
                (GateVerdict::Allow, Ok(()))
            }
            GateDecision::Deny { reason } => {
                tracing::info!(tool = name, call_id, gate = "deny", %reason, "the eval gate blocked the call");
                let message = format!("{name} was blocked by the eval gate: {reason}");
                (
                    GateVerdict::Deny,
                    Err(GateRefusal::Refused(ToolError::new(
                        ErrorCode::Blocked,
                        message,
                    ))),
                )
            }
            GateDecision::Ask { reason } => {
                tracing::info!(tool = name, call_id, gate = "ask", %reason, "the eval gate wants a person's approval");
                (GateVerdict::Ask, Err(GateRefusal::Ask(reason)))
            }
        })
    }
}

/// Pause before the one retry of a call that failed transiently.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// What the pipeline noted about one call on its way, for the audit
/// record and the result.
#[derive(Debug, Default)]
struct Trace {
    /// The gate step's verdict, when the call reached it.
    gate: Option<GateVerdict>,
    /// How often the handler ran (0 when it never did; the result and the
    /// audit record count such a call as one attempt).
    attempts: u32,
}

/// Why the gate step did not let a call through.
enum GateRefusal {
    /// A person must approve it first; the gate's reason.
    Ask(String),
    Refused(ToolError),
}

/// The names of the discovery meta-tools; no tool may take them.
pub const META_TOOLS: [&str; 3] = [SEARCH_TOOLS, DESCRIBE_TOOL, EXECUTE_TOOL];

/// Checks `args` against the schema of `name`, naming every violation with
/// its JSON pointer.
fn check_arguments(
    name: &str,
    validator: &jsonschema::Validator,
    args: &Value,
) -> Result<(), ToolError> {
    let violations: Vec<String> = validator
        .iter_errors(args)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if violations.is_empty() {
        return Ok(());
    }
    Err(ToolError::invalid(format!(
        "invalid arguments for {name}: {}",
        violations.join("; ")
    )))
}

/// Agent profiles live in an `agents/` folder beside the definitions.
fn is_profile_file(def: &DefinitionFile) -> bool {
    std::path::Path::new(&def.file)
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|d| d == "agents")
}

/// Holds a call to the one document its context is scoped to: a missing
/// `document_id` becomes that document, another one is refused, and a tool
/// without the argument cannot be limited and is refused too. Checked here,
/// before the handler, so no tool has to remember it.
fn pin_document(
    name: &str,
    definition: &Value,
    args: &mut Value,
    document: uuid::Uuid,
) -> Result<(), ToolError> {
    let takes_document = definition
        .pointer("/parameters/properties/document_id")
        .is_some();
    let Some(map) = args.as_object_mut().filter(|_| takes_document) else {
        return Err(ToolError::new(
            ErrorCode::NotAvailable,
            format!(
                "tool {name} is not available here: this agent may read only document {document}"
            ),
        ));
    };
    match map.get("document_id") {
        None | Some(Value::Null) => {
            map.insert("document_id".into(), Value::String(document.to_string()));
            Ok(())
        }
        Some(Value::String(given)) if uuid::Uuid::parse_str(given).ok() == Some(document) => Ok(()),
        Some(given) => Err(ToolError::new(
            ErrorCode::PermissionDenied,
            format!(
                "document_id {} is out of reach: this agent may read only document {document}; leave document_id out or pass {document}",
                given
                    .as_str()
                    .map_or_else(|| given.to_string(), str::to_string)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scoped_call_is_pinned_to_its_document() {
        let doc = uuid::Uuid::from_u128(7);
        let other = uuid::Uuid::from_u128(8);
        let with_id =
            json!({ "parameters": { "properties": { "document_id": {}, "pattern": {} } } });
        let without = json!({ "parameters": { "properties": { "pattern": {} } } });
        // (definition, arguments, arguments after pinning or the error code and words)
        let check =
            |definition: &Value, args: Value, expected: Result<Value, (ErrorCode, &str)>| {
                let mut pinned = args.clone();
                let got = pin_document("tool_x", definition, &mut pinned, doc);
                match (got, expected) {
                    (Ok(()), Ok(want)) => assert_eq!(pinned, want, "{args}"),
                    (Err(e), Err((code, words))) => {
                        assert_eq!(e.code, code, "{args}: {e}");
                        assert!(e.message.contains(words), "{args}: {e}");
                    }
                    (got, want) => panic!("{args}: got {got:?}, expected {want:?}"),
                }
            };
        check(
            &with_id,
            json!({ "pattern": "a" }),
            Ok(json!({ "pattern": "a", "document_id": doc })),
        );
        check(
            &with_id,
            json!({ "document_id": null }),
            Ok(json!({ "document_id": doc })),
        );
        check(
            &with_id,
            json!({ "document_id": doc }),
            Ok(json!({ "document_id": doc })),
        );
        check(
            &with_id,
            json!({ "document_id": doc.to_string().to_uppercase() }),
            Ok(json!({ "document_id": doc.to_string().to_uppercase() })),
        );
        check(
            &with_id,
            json!({ "document_id": other }),
            Err((
                ErrorCode::PermissionDenied,
                &format!("document_id {other} is out of reach"),
            )),
        );
        check(
            &with_id,
            json!({ "document_id": 42 }),
            Err((ErrorCode::PermissionDenied, "out of reach")),
        );
        check(
            &with_id,
            json!({ "document_id": "not-a-uuid" }),
            Err((ErrorCode::PermissionDenied, "not-a-uuid")),
        );
        check(
            &without,
            json!({ "pattern": "a" }),
            Err((ErrorCode::NotAvailable, "tool tool_x is not available here")),
        );
        check(
            &with_id,
            json!([1]),
            Err((ErrorCode::NotAvailable, "may read only document")),
        );
    }
}
