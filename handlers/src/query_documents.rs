//! query_documents: SQL or a question over a document's tables.

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

/// The arguments, as definitions/query_documents.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The document whose tables to query.
    pub document_id: Uuid,
    /// One SELECT statement over the document's tables, each available by its name from document_info (columns typed as listed there).
    pub sql: Option<String>,
    /// A question in plain language, turned into SQL for you (needs a language model); give this or sql.
    pub question: Option<String>,
    /// Most rows to return.
    pub max_rows: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Document,
    short_description: "SQL or a question over a document's tables",
    available_when: "always",
    aliases: &["sql"],
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
    Err(ToolError::unavailable("query_documents is not built yet"))
}
