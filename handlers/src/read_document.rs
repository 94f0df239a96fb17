//! read_document: document text by character range.

use std::time::Duration;

use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, Permission, RateLimits, TagSpec, ToolContext,
    ToolError, ToolMeta,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Deps;
use crate::deps::internal;
use crate::document_info::not_found;

/// The arguments, as definitions/read_document.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The document to read.
    pub document_id: Uuid,
    /// Character offset to start at (0 = beginning). Search results give offsets.
    pub start: Option<u64>,
    /// Most characters to return.
    pub max_length: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Document,
    short_description: "document text by character range",
    available_when: "always",
    aliases: &["read", "cat"],
    annotations: AnnotationHints::DERIVED,
    cost: CostTier::Cheap,
    permission: Permission::Guest,
    timeout: Duration::from_millis(10000),
    limits: RateLimits::NONE,
    requires_gate: false,
    defer_loading: false,
    tag: Some(TagSpec {
        tag_prefix: "READ",
        pattern: r"(?P<document_id>\S+)",
        example: "READ: 3f2b8c4e-9a1d-4e7b-8c2f-5d6e7f8a9b0c",
        strip_from_display: true,
    }),
};

pub fn available(_ctx: &ToolContext) -> bool {
    true
}

/// The hard cap on one read, whatever max_length asks for.
pub const MAX_READ_CHARS: u64 = 20_000;

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub document_id: Uuid,
    pub path: String,
    pub title: Option<String>,
    /// Character range returned, end exclusive (Unicode code points, the
    /// unit of search results' offsets).
    pub start: u64,
    pub end: u64,
    pub total_chars: u64,
    pub text: String,
    /// The range to ask for next, absent at the end of the document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<NextRange>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NextRange {
    pub start: u64,
    pub max_length: u64,
    pub remaining_chars: u64,
}

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let start = args.start.unwrap_or(0);
    let want = args.max_length.unwrap_or(8_000).clamp(1, MAX_READ_CHARS);
    let mut tx = deps.read(NAME, ctx).await?;
    // substr works in characters, so only the requested range leaves the database.
    let row: Option<(String, Option<String>, i64, String)> = sqlx::query_as(
        "SELECT path, title, char_length(content)::bigint,
                substr(content, $3::bigint::int + 1, $4::bigint::int)
           FROM documents
          WHERE id = $1 AND ($2::uuid IS NULL OR space_id = $2)",
    )
    .bind(args.document_id)
    .bind(ctx.space_id)
    .bind(start.min(i32::MAX as u64 - 1) as i64)
    .bind(want as i64)
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| internal(NAME, e))?;
    let Some((path, title, total, text)) = row else {
        return Err(not_found(args.document_id));
    };
    let total = total as u64;
    if start > total {
        return Err(ToolError::invalid(format!(
            "start {start} is beyond the end of the document ({total} characters)"
        )));
    }
    let end = start + text.chars().count() as u64;
    let next = (end < total).then(|| NextRange {
        start: end,
        max_length: want,
        remaining_chars: total - end,
    });
    Ok(Output {
        document_id: args.document_id,
        path,
        title,
        start,
        end,
        total_chars: total,
        text,
        next,
    })
}

const NAME: &str = "read_document";
