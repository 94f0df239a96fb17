//! list_folder_contents: folders and documents in one folder, paginated.

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

/// The arguments, as definitions/list_folder_contents.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The source to look in (from list_sources).
    pub source_id: Uuid,
    /// Folder path inside the source, e.g. `manual/tutorial`; empty or `/` for the top.
    pub path: Option<String>,
    /// Most entries to return.
    pub limit: Option<u64>,
    /// Entries to skip, for the next page.
    pub offset: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Navigation,
    short_description: "folders and documents in one folder, paginated",
    available_when: "a space is selected",
    aliases: &["ls", "list_folder"],
    annotations: Annotations::READ_ONLY,
    cost: CostTier::Cheap,
    permission: Permission::Guest,
    timeout: Duration::from_millis(5000),
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
    Err(ToolError::unavailable(
        "list_folder_contents is not built yet",
    ))
}
