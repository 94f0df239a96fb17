//! search_documents: hybrid, vector or keyword search over passages.

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

/// The arguments, as definitions/search_documents.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// What to look for, in natural language or keywords. Put exact phrases in double quotes.
    pub query: String,
    /// Retriever: hybrid (default), vector or keyword.
    pub mode: Option<String>,
    /// Number of passages to return.
    pub limit: Option<u64>,
    /// Only search this source (or feed).
    pub source_id: Option<Uuid>,
    /// Only search documents in this folder and below, e.g. `manual/tutorial`.
    pub folder: Option<String>,
    /// Only search this document.
    pub document_id: Option<Uuid>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Search,
    short_description: "hybrid, vector or keyword search over passages",
    available_when: "always",
    aliases: &["search"],
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
    Err(ToolError::unavailable("search_documents is not built yet"))
}
