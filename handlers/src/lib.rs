//! One handler per tool (file = tool name = definition file stem), the
//! explicit alphabetical list of all of them, the PostgreSQL ledger that
//! keeps rate limits and the audit log for the registry, and the HTTP eval
//! gate.

pub mod deps;
pub mod gate;
pub mod ledger;
mod prefilter;

mod analyze_document;
pub mod document_info;
mod fetch_web_page;
mod find_by_name;
mod folder_tree;
mod grep_documents;
mod list_folder_contents;
mod list_sources;
mod query_documents;
mod read_document;
pub mod search_documents;
mod web_search;

use std::sync::Arc;

use async_trait::async_trait;
use data_plane_registry::{
    Callbacks, DefinitionFile, HandlerEntry, Ledger, Registry, RegistryError, Settings,
    ToolContext, ToolError, ToolHandler,
};
use serde_json::Value;

pub use deps::{Deps, ModelSettings, Rerank, SubAgentLimits};
pub use gate::{HttpGate, HttpGateError};
pub use ledger::{LedgerOptions, PgLedger};
pub use read_document::MAX_READ_CHARS;

/// Every file of definitions/, embedded at build time.
const DEFINITIONS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/definitions.rs"));

/// The definition files as the registry reads them.
pub fn definitions() -> Vec<DefinitionFile> {
    DEFINITIONS
        .iter()
        .map(|(file, text)| DefinitionFile {
            file: (*file).to_string(),
            text: (*text).to_string(),
        })
        .collect()
}

/// Parses validated arguments into a handler's argument type.
fn parse_args<T: serde::de::DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args)
        .map_err(|e| ToolError::invalid(format!("invalid arguments for {tool}: {e}")))
}

/// The JSON Schema of what a handler's `Output` serialises to (a field
/// skipped when empty is not required), as MCP clients read it: the type's
/// own name (`Output`) is no title worth showing.
fn output_schema<T: schemars::JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
    }
    schema
}

/// Turns a handler module (`Args`, `META`, `available`, `run`, and `shape`
/// or `asks` where named) into a registry entry.
macro_rules! entry {
    ($deps:expr, $tool:ident) => {
        entry!($deps, $tool, None, None)
    };
    ($deps:expr, $tool:ident, shape) => {
        entry!($deps, $tool, Some($tool::shape), None)
    };
    ($deps:expr, $tool:ident, asks) => {
        entry!($deps, $tool, None, Some($tool::asks))
    };
    ($deps:expr, $tool:ident, $shape:expr, $asks:expr) => {{
        struct Handler(Option<Arc<Deps>>);

        #[async_trait]
        impl ToolHandler for Handler {
            async fn call(
                &self,
                args: Value,
                ctx: &ToolContext,
                callbacks: &dyn Callbacks,
            ) -> Result<Value, ToolError> {
                let Some(deps) = &self.0 else {
                    return Err(ToolError::unavailable(
                        "this registry was built for listing only and cannot run tools",
                    ));
                };
                let args: $tool::Args = parse_args(stringify!($tool), args)?;
                let output = $tool::run(deps, args, ctx, callbacks).await?;
                serde_json::to_value(output).map_err(|e| {
                    ToolError::internal(format!(
                        "{} produced unserialisable output: {e}",
                        stringify!($tool)
                    ))
                })
            }
        }

        HandlerEntry {
            name: stringify!($tool),
            file: concat!("handlers/src/", stringify!($tool), ".rs"),
            meta: $tool::META,
            available: $tool::available,
            shape: $shape,
            asks: $asks,
            handler: Arc::new(Handler($deps.cloned())),
            args_schema: serde_json::to_value(schemars::schema_for!($tool::Args))
                .unwrap_or_default(),
            output_schema: Some(output_schema::<$tool::Output>()),
        }
    }};
}

/// Every handler, alphabetically. Without `deps` the handlers only describe
/// themselves (for listings) and refuse to run.
pub fn all(deps: Option<&Arc<Deps>>) -> Vec<HandlerEntry> {
    vec![
        entry!(deps, analyze_document),
        entry!(deps, document_info),
        entry!(deps, fetch_web_page, asks),
        entry!(deps, find_by_name),
        entry!(deps, folder_tree),
        entry!(deps, grep_documents),
        entry!(deps, list_folder_contents),
        entry!(deps, list_sources),
        entry!(deps, query_documents),
        entry!(deps, read_document),
        entry!(deps, search_documents, shape),
        entry!(deps, web_search),
    ]
}

/// The run-time settings at their defaults, with every tool's own settings
/// declared, alphabetically by tool: what an admin may read and change.
pub fn settings() -> Settings {
    Settings::default()
        .declare(&fetch_web_page::TRUSTED_HOSTS)
        .declare(&search_documents::FIELD_WEIGHTS)
        .declare(&search_documents::BM25)
        .declare(&search_documents::FUSION)
        .declare(&web_search::PROVIDER)
}

/// The setting by which an admin chooses web_search's provider.
pub use web_search::PROVIDER as WEB_SEARCH_PROVIDER;

/// The agent profiles the server itself relies on: `chat` (the default of
/// /v1/chat), `explore`, `analyze_document` (the sub-agent's) and
/// `service` (executeTool over HTTP and the module protocol).
pub const REQUIRED_PROFILES: [&str; 4] = ["analyze_document", "chat", "explore", "service"];

/// The registry of every tool, with the given ledger.
pub fn registry(deps: &Arc<Deps>, ledger: Arc<dyn Ledger>) -> Result<Registry, RegistryError> {
    with_required_profiles(Registry::build(definitions(), all(Some(deps)), ledger)?)
}

/// The registry without any service behind it, for `data-plane tools` and
/// checks that need no database.
pub fn offline_registry() -> Result<Registry, RegistryError> {
    with_required_profiles(Registry::build(
        definitions(),
        all(None),
        Arc::new(data_plane_registry::NoLedger),
    )?)
}

fn with_required_profiles(registry: Registry) -> Result<Registry, RegistryError> {
    let problems: Vec<String> = REQUIRED_PROFILES
        .iter()
        .filter(|p| registry.profile(p).is_none())
        .map(|p| format!("the agent profile {p} is missing (expected definitions/agents/{p}.json)"))
        .collect();
    if problems.is_empty() {
        Ok(registry)
    } else {
        Err(RegistryError { problems })
    }
}
