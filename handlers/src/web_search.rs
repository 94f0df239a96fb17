//! web_search: search the web through the configured provider.

use std::time::Duration;

use data_plane_registry::{
    Annotations, Callbacks, Category, CostTier, Permission, RateLimits, ToolContext, ToolError,
    ToolMeta,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::Deps;

/// The arguments, as definitions/web_search.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The search terms.
    #[expect(
        dead_code,
        reason = "read once the handler is built; until then it refuses every call"
    )]
    pub query: String,
    /// Number of results.
    #[expect(
        dead_code,
        reason = "read once the handler is built; until then it refuses every call"
    )]
    pub count: Option<u64>,
    /// Only results from the last day, week, month or year.
    #[expect(
        dead_code,
        reason = "read once the handler is built; until then it refuses every call"
    )]
    pub freshness: Option<String>,
    /// Only results from this site, e.g. `postgresql.org`.
    #[expect(
        dead_code,
        reason = "read once the handler is built; until then it refuses every call"
    )]
    pub site: Option<String>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Web,
    short_description: "search the web through the configured provider",
    available_when: "an admin has switched web search on",
    aliases: &["search_web"],
    annotations: Annotations::READ_ONLY_OPEN_WORLD,
    cost: CostTier::Expensive,
    permission: Permission::User,
    timeout: Duration::from_millis(20000),
    limits: RateLimits {
        cooldown: Some(Duration::from_millis(500)),
        daily_limit: Some(500),
    },
    needs_approval: false,
    defer_loading: false,
};

pub fn available(ctx: &ToolContext) -> bool {
    ctx.settings.web_search_enabled
}

pub async fn run(
    _deps: &Deps,
    _args: Args,
    _ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Value, ToolError> {
    Err(ToolError::unavailable(
        "web search is switched on but no provider is configured",
    ))
}
