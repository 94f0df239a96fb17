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
    #[expect(
        dead_code,
        reason = "read once the handler is built; until then it refuses every call"
    )]
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
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Value, ToolError> {
    // The document must be one the caller can read, whatever happens next.
    let mut tx = deps.read("analyze_document", ctx).await?;
    let readable: Option<Uuid> = sqlx::query_scalar(
        "SELECT id FROM documents WHERE id = $1 AND ($2::uuid IS NULL OR space_id = $2)",
    )
    .bind(args.document_id)
    .bind(ctx.space_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| crate::deps::internal("analyze_document", e))?;
    if readable.is_none() {
        return Err(crate::document_info::not_found(args.document_id));
    }
    Err(ToolError::unavailable(
        "analyze_document needs a language model and none is configured (set OPENAI_BASE_URL and DATA_PLANE_MODEL)",
    ))
}
