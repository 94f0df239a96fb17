//! list_sources: sources of the space with document counts.

use std::time::Duration;

use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, Permission, RateLimits, ToolContext, ToolError,
    ToolMeta,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Deps;
use crate::deps::internal;

/// The arguments, as definitions/list_sources.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

pub const META: ToolMeta = ToolMeta {
    category: Category::Navigation,
    short_description: "sources of the space with document counts",
    available_when: "a space is selected",
    aliases: &["sources"],
    annotations: AnnotationHints::DERIVED,
    cost: CostTier::Cheap,
    permission: Permission::Guest,
    timeout: Duration::from_millis(5000),
    limits: RateLimits::NONE,
    requires_gate: false,
    defer_loading: false,
    tag: None,
};

pub fn available(ctx: &ToolContext) -> bool {
    ctx.space_id.is_some()
}

/// One source of the space.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SourceInfo {
    pub source_id: Uuid,
    pub name: String,
    pub kind: String,
    pub documents: i64,
    pub folders: i64,
    pub bytes: i64,
}
data_plane_store::from_row!(SourceInfo {
    source_id,
    name,
    kind,
    documents,
    folders,
    bytes
});

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub space_id: Uuid,
    pub sources: Vec<SourceInfo>,
}

pub async fn run(
    deps: &Deps,
    _args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let mut tx = deps.read(NAME, ctx).await?;
    let spaces = deps.spaces(NAME, &mut tx, ctx).await?;
    let Some(&space_id) = spaces.first().filter(|_| ctx.space_id.is_some()) else {
        return Err(ToolError::invalid("list_sources needs a space (spaceId)"));
    };
    let sources: Vec<SourceInfo> = sqlx::query_as(
        "SELECT s.id AS source_id, s.name, s.kind::text AS kind,
                (SELECT count(*) FROM documents d WHERE d.source_id = s.id) AS documents,
                (SELECT count(*) FROM folders f WHERE f.source_id = s.id AND f.parent_id IS NOT NULL) AS folders,
                (SELECT coalesce(sum(d.size_bytes), 0)::bigint FROM documents d WHERE d.source_id = s.id) AS bytes
           FROM sources s
          WHERE s.space_id = $1
          ORDER BY s.name",
    )
    .bind(space_id)
    .fetch_all(&mut *tx)
    .await
    .map_err(|e| internal(NAME, e))?;
    Ok(Output { space_id, sources })
}

const NAME: &str = "list_sources";
