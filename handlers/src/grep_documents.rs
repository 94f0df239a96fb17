//! grep_documents: exact text or regex matches with line numbers.

use std::time::Duration;

use data_plane_registry::{
    Annotations, Callbacks, Category, CostTier, Permission, RateLimits, ToolContext, ToolError,
    ToolMeta,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::Deps;

/// The arguments, as definitions/grep_documents.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Text to find; a regular expression (Rust syntax, no look-around or backreferences) when regex is true.
    pub pattern: String,
    /// Treat pattern as a regular expression.
    pub regex: Option<bool>,
    /// Match case exactly.
    pub case_sensitive: Option<bool>,
    /// Only documents whose path matches this glob, e.g. `**/*.md` or `manual/**`.
    pub path_glob: Option<String>,
    /// Lines of context before and after each match.
    pub context_lines: Option<u64>,
    /// Most matches to return.
    pub max_results: Option<u64>,
    /// Only search this source.
    pub source_id: Option<Uuid>,
    /// Only search this document.
    pub document_id: Option<Uuid>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Search,
    short_description: "exact text or regex matches with line numbers",
    available_when: "always",
    aliases: &["grep"],
    annotations: Annotations::READ_ONLY,
    cost: CostTier::Moderate,
    permission: Permission::Guest,
    timeout: Duration::from_millis(20000),
    limits: RateLimits::NONE,
    needs_approval: false,
    defer_loading: false,
};

pub fn available(_ctx: &ToolContext) -> bool {
    true
}

pub async fn run(
    _deps: &Deps,
    _args: Args,
    _ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Value, ToolError> {
    Err(ToolError::unavailable("grep_documents is not built yet"))
}
