//! The registry as a catalogue: built at start-up from the definitions,
//! handlers and profiles, the remote modules' tools swapped in, and what
//! it offers a context (`offered`, `get_available_tools`). The pipeline
//! every call takes (`execute_tool`) is `registry/pipeline.rs`.

mod pipeline;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;

use crate::approval::Approver;
use crate::discovery::{self, EXECUTE_TOOL, META_ANNOTATIONS, META_TOOLS, OfferedTool};
use crate::entry::{DefinitionFile, HandlerEntry, ToolEntry};
use crate::gate::Gate;
use crate::ledger::Ledger;
use crate::profile::{self, AgentProfile};
use crate::remote::RemoteTools;
use crate::tag::{self, Tag};
use crate::{Annotations, Category, Deployment, ToolContext};

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
            let output_schema = match h.output_schema {
                Some(schema) => match output_schema_problem(&schema) {
                    Some(problem) => {
                        problems.push(format!("{}: {problem}", h.file));
                        None
                    }
                    None => Some(Arc::new(schema)),
                },
                None => None,
            };
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
                output_schema,
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
}

/// Agent profiles live in an `agents/` folder beside the definitions.
/// What is wrong with a handler's output schema, if anything: it must be
/// valid JSON Schema and describe an object (MCP's structured content is
/// one).
fn output_schema_problem(schema: &Value) -> Option<String> {
    if let Err(e) = jsonschema::meta::validate(schema) {
        return Some(format!("its output schema is not valid JSON Schema: {e}"));
    }
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Some(format!(
            "its output schema must describe an object, not {}",
            schema.get("type").unwrap_or(&Value::Null)
        ));
    }
    None
}

fn is_profile_file(def: &DefinitionFile) -> bool {
    std::path::Path::new(&def.file)
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|d| d == "agents")
}
