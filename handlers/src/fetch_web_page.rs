//! fetch_web_page: readable content of a web page.

use std::time::Duration;

use data_plane_registry::{
    Annotations, Callbacks, Category, CostTier, Permission, RateLimits, ToolContext, ToolError,
    ToolMeta,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::Deps;

/// The arguments, as definitions/fetch_web_page.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The http or https URL to fetch.
    #[expect(
        dead_code,
        reason = "read once the handler is built; until then it refuses every call"
    )]
    pub url: String,
    /// Character offset in the extracted text to start at.
    #[expect(
        dead_code,
        reason = "read once the handler is built; until then it refuses every call"
    )]
    pub start: Option<u64>,
    /// Most characters to return.
    #[expect(
        dead_code,
        reason = "read once the handler is built; until then it refuses every call"
    )]
    pub max_length: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Web,
    short_description: "readable content of a web page",
    available_when: "fetching web pages is switched on (the default)",
    aliases: &["fetch", "open_url"],
    annotations: Annotations::READ_ONLY_OPEN_WORLD,
    cost: CostTier::Expensive,
    permission: Permission::User,
    timeout: Duration::from_millis(30000),
    limits: RateLimits {
        cooldown: None,
        daily_limit: Some(2000),
    },
    needs_approval: false,
    defer_loading: false,
};

pub fn available(ctx: &ToolContext) -> bool {
    ctx.settings.fetch_web_page_enabled
}

pub async fn run(
    _deps: &Deps,
    _args: Args,
    _ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Value, ToolError> {
    Err(ToolError::unavailable(
        "fetching web pages is not available in this build",
    ))
}
