//! analyze_document: a nested agent studies one document.

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

/// The arguments, as definitions/analyze_document.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The document to analyse.
    pub document_id: Uuid,
    /// What to find out about the document.
    pub question: String,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Document,
    short_description: "a nested agent studies one document",
    available_when: "always",
    aliases: &["analyse_document"],
    annotations: Annotations::READ_ONLY,
    cost: CostTier::Expensive,
    permission: Permission::User,
    timeout: Duration::from_millis(300000),
    limits: RateLimits {
        cooldown: None,
        daily_limit: Some(200),
    },
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
    Err(ToolError::unavailable(
        "analyze_document needs a language model and none is configured (set OPENAI_BASE_URL and DATA_PLANE_MODEL)",
    ))
}
