//! find_by_name: documents whose path or name matches a glob.

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

/// The arguments, as definitions/find_by_name.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Glob pattern: `*` any characters except `/`, `**` any folders, `?` one character, `{a,b}` alternatives, `[abc]` a class. A pattern without `/` is matched against the file name.
    pub pattern: String,
    /// Match case exactly.
    pub case_sensitive: Option<bool>,
    /// Only look in this source.
    pub source_id: Option<Uuid>,
    /// Most documents to return.
    pub limit: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Search,
    short_description: "documents whose path or name matches a glob",
    available_when: "always",
    aliases: &["find", "glob"],
    annotations: Annotations::READ_ONLY,
    cost: CostTier::Cheap,
    permission: Permission::Guest,
    timeout: Duration::from_millis(10000),
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
    Err(ToolError::unavailable("find_by_name is not built yet"))
}
