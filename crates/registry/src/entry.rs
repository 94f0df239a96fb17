//! The parts of a tool: its definition file, its handler, and the metadata
//! the registry enforces.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use crate::{Callbacks, Permission, Tag, ToolContext, ToolError};

/// Where a tool shows up in listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Navigation,
    Search,
    Document,
    Web,
    /// A remote module's tool (`module.tool`), offered by the profile's
    /// `modules`, never by its categories.
    Module,
}

impl Category {
    /// The categories of the server's own tools, which profiles name.
    pub const ALL: [Category; 4] = [
        Category::Navigation,
        Category::Search,
        Category::Document,
        Category::Web,
    ];

    /// The name profiles, policies and listings use (`navigation`).
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Navigation => "navigation",
            Category::Search => "search",
            Category::Document => "document",
            Category::Web => "web",
            Category::Module => "module",
        }
    }
}

/// What a call does to the world, as clients and models read it (MCP's
/// tool annotations) and as the registry acts on it: only idempotent tools
/// are retried automatically, only read-only tools run concurrently, and a
/// tool that requires confirmation runs only when the registry's approver
/// says so.
///
/// Every tool has all five; [`Annotations::derive`] fills in what its
/// metadata does not state ([`AnnotationHints`]) by written rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotations {
    /// Changes nothing: not the deployment's data, not the outside world.
    pub read_only: bool,
    /// May destroy or overwrite something.
    pub destructive: bool,
    /// Calling again with the same arguments has no further effect and may
    /// be retried safely.
    pub idempotent: bool,
    /// Reaches beyond the deployment's own data (the web).
    pub open_world: bool,
    /// A person must approve each call before it runs.
    pub requires_confirmation: bool,
}

/// What a tool's metadata states about its [`Annotations`]; `None` leaves
/// the field to the rules of [`Annotations::derive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AnnotationHints {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires_confirmation: Option<bool>,
}

impl AnnotationHints {
    /// Nothing stated: every annotation follows the rules.
    pub const DERIVED: AnnotationHints = AnnotationHints {
        read_only: None,
        destructive: None,
        idempotent: None,
        open_world: None,
        requires_confirmation: None,
    };
}

impl Annotations {
    /// The annotations of a tool of `category` whose metadata states
    /// `hints`. The rules, each applying where the hints are silent:
    ///
    /// 1. every category reads: navigation, search and document tools read
    ///    the deployment's own data, web tools read the web; so a tool is
    ///    read-only unless it says otherwise;
    /// 2. web tools are open-world, the others are not;
    /// 3. a read-only tool is never destructive; a tool that writes is
    ///    destructive unless it says otherwise;
    /// 4. a read-only tool over the deployment's own data is idempotent;
    ///    an open-world one is not (the web changes between two calls, and a
    ///    repeated fetch is another request to somebody else's server), nor
    ///    is a tool that writes;
    /// 5. a destructive tool requires confirmation, others do not;
    /// 6. a remote module's tool is another service's: unless its manifest
    ///    says otherwise it is open-world and not read-only (so neither
    ///    retried nor run concurrently), but not known to destroy anything.
    ///
    /// Contradictions (read-only and destructive) are refused at start-up by
    /// the registry, naming the handler.
    pub fn derive(category: Category, hints: AnnotationHints) -> Annotations {
        let module = category == Category::Module;
        let read_only = hints.read_only.unwrap_or(!module);
        let open_world = hints
            .open_world
            .unwrap_or(matches!(category, Category::Web | Category::Module));
        let destructive = hints.destructive.unwrap_or(!read_only && !module);
        let idempotent = hints.idempotent.unwrap_or(read_only && !open_world);
        let requires_confirmation = hints.requires_confirmation.unwrap_or(destructive);
        Annotations {
            read_only,
            destructive,
            idempotent,
            open_world,
            requires_confirmation,
        }
    }

    /// As tracing fields and audit columns print them: the names of the
    /// annotations that hold, comma-separated (`read_only,idempotent`).
    pub fn flags(&self) -> String {
        [
            (self.read_only, "read_only"),
            (self.destructive, "destructive"),
            (self.idempotent, "idempotent"),
            (self.open_world, "open_world"),
            (self.requires_confirmation, "requires_confirmation"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join(",")
    }
}

/// How a model without function calling writes a call to the tool as one
/// line of text: `PREFIX: argument` (`SEARCH: vacuum full`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TagSpec {
    /// The word that opens the line, upper-case (`SEARCH`).
    pub tag_prefix: &'static str,
    /// A regular expression over the text after `PREFIX:`, whose named
    /// groups are the call's arguments (`(?P<query>.+)`). Checked against
    /// the definition at start-up.
    pub pattern: &'static str,
    /// One line the prompt shows as an example (`SEARCH: vacuum full`).
    pub example: &'static str,
    /// Keep the line out of the text the user sees (the default).
    pub strip_from_display: bool,
}

/// Rough cost of one call, for agents that budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostTier {
    /// One or two indexed database reads.
    Cheap,
    /// Search, scans, embedding a query.
    Moderate,
    /// Calls a model or an outside service.
    Expensive,
}

/// Per-user limits, kept in PostgreSQL so they hold across replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RateLimits {
    /// Least time between two calls of the tool by one user.
    #[serde(with = "millis")]
    pub cooldown: Option<Duration>,
    /// Most calls of the tool by one user per UTC day.
    pub daily_limit: Option<u32>,
}

impl RateLimits {
    pub const NONE: RateLimits = RateLimits {
        cooldown: None,
        daily_limit: None,
    };
    pub fn is_none(&self) -> bool {
        self.cooldown.is_none() && self.daily_limit.is_none()
    }
}

/// An admin's change to a tool's [`RateLimits`]: a field left out keeps the
/// tool's default, `null` lifts that limit, a number replaces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitOverride {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cooldown_ms: Option<Option<u64>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub daily_limit: Option<Option<u32>>,
}

impl RateLimitOverride {
    pub fn apply(&self, defaults: RateLimits) -> RateLimits {
        RateLimits {
            cooldown: match self.cooldown_ms {
                Some(ms) => ms.filter(|&ms| ms > 0).map(Duration::from_millis),
                None => defaults.cooldown,
            },
            daily_limit: self.daily_limit.unwrap_or(defaults.daily_limit),
        }
    }
}

/// A field that is present, even as `null`, is `Some`; serde's default
/// makes an absent one `None`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
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
    /// JSON Schema of what a successful call returns (an object), where
    /// the tool declares one: MCP's outputSchema.
    pub output_schema: Option<Arc<Value>>,
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

mod millis {
    use std::time::Duration;

    use serde::Serializer;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }
}

/// Everything about a tool besides its definition and handler.
#[derive(Debug, Clone, Serialize)]
pub struct ToolMeta {
    pub category: Category,
    pub short_description: &'static str,
    /// When the tool is offered, in words ("a space is selected"); used in
    /// the error for a call outside that context.
    pub available_when: &'static str,
    pub aliases: &'static [&'static str],
    /// What the tool states about its annotations; the registry derives the
    /// rest (see [`Annotations::derive`]).
    pub annotations: AnnotationHints,
    pub cost: CostTier,
    pub permission: Permission,
    #[serde(rename = "timeout_ms", serialize_with = "timeout_ms")]
    pub timeout: Duration,
    pub limits: RateLimits,
    /// Calls pass the registry's gate (an evaluation service or a policy)
    /// before they run.
    pub requires_gate: bool,
    /// Left out of the tool list sent up front; the discovery meta-tools
    /// still find it.
    pub defer_loading: bool,
    /// How a model without function calling writes a call, if it can.
    pub tag: Option<TagSpec>,
}

fn timeout_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// Runs one tool. Arguments arrive already validated against the definition.
#[async_trait]
pub trait ToolHandler: Send + Sync {
    async fn call(
        &self,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError>;
}

/// A tool's own judgement of one call: `Some(why)` when a person should
/// approve it first.
pub type AsksFn = fn(&Value, &ToolContext) -> Option<String>;

/// A handler as the handlers crate lists it.
#[derive(Clone)]
pub struct HandlerEntry {
    pub name: &'static str,
    /// The source file, for start-up errors that name it.
    pub file: &'static str,
    pub meta: ToolMeta,
    pub available: fn(&ToolContext) -> bool,
    /// Adjusts the tool's definition to what a context can do (search
    /// without embeddings offers only keyword mode); `None`: as written.
    pub shape: Option<fn(&mut Value, &ToolContext)>,
    /// Whether a call with these (validated) arguments asks a person first
    /// in a chat run, and why; `None`: the tool never asks by itself.
    pub asks: Option<AsksFn>,
    pub handler: Arc<dyn ToolHandler>,
    /// JSON Schema of the handler's argument type, compared with the
    /// definition by a test.
    pub args_schema: Value,
    /// JSON Schema of the handler's output type (what a successful call's
    /// `data` holds), checked when the registry is built: an object.
    pub output_schema: Option<Value>,
}

impl std::fmt::Debug for HandlerEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerEntry")
            .field("name", &self.name)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// A definition file's name and text.
#[derive(Debug, Clone)]
pub struct DefinitionFile {
    pub file: String,
    pub text: String,
}
