//! folder_tree: folder hierarchy of a source with counts.

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

/// The arguments, as definitions/folder_tree.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The source whose folders to show (from list_sources).
    pub source_id: Uuid,
    /// Folder to start from; empty or `/` for the top.
    pub path: Option<String>,
    /// How many levels below the start folder to show.
    pub max_depth: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Navigation,
    short_description: "folder hierarchy of a source with counts",
    available_when: "a space is selected",
    aliases: &["tree"],
    annotations: Annotations::READ_ONLY,
    cost: CostTier::Cheap,
    permission: Permission::Guest,
    timeout: Duration::from_millis(10000),
    limits: RateLimits::NONE,
    needs_approval: false,
    defer_loading: false,
};

pub fn available(ctx: &ToolContext) -> bool {
    ctx.space_id.is_some()
}

pub async fn run(
    _deps: &Deps,
    _args: Args,
    _ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Value, ToolError> {
    Err(ToolError::unavailable("folder_tree is not built yet"))
}
