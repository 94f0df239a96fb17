//! document_info: extracted metadata of one document.

use std::time::Duration;

use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, Permission, RateLimits, ToolContext, ToolError,
    ToolMeta,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use data_plane_store::Scope;
use data_plane_store::exchange::{Param, Prepared};
use sqlx::FromRow;

use crate::Deps;
use crate::deps::internal;

/// The arguments, as definitions/document_info.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The document (from search or listing results).
    pub document_id: Uuid,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Document,
    short_description: "extracted metadata of one document",
    available_when: "always",
    aliases: &["stat"],
    annotations: AnnotationHints::DERIVED,
    cost: CostTier::Cheap,
    permission: Permission::Guest,
    timeout: Duration::from_millis(5000),
    limits: RateLimits::NONE,
    requires_gate: false,
    defer_loading: false,
    tag: None,
};

pub fn available(_ctx: &ToolContext) -> bool {
    true
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub document_id: Uuid,
    pub space_id: Uuid,
    pub source_id: Uuid,
    pub source: String,
    pub path: String,
    pub name: String,
    pub mime: String,
    pub size_bytes: i64,
    pub title: Option<String>,
    pub language: Option<String>,
    pub version: i32,
    pub chunks: i64,
    pub ingested_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// Everything extraction found: headings, counts, dates, author, tables.
    pub metadata: Value,
}

/// The whole read: `$1` the document, `$2` the context's space or NULL.
/// Public so that `bench_calls` can time the very same statement in
/// PostgreSQL's own client.
pub const QUERY: &str =
    "SELECT d.id, d.space_id, d.source_id, s.name AS source, d.path, d.name, d.mime,
        d.size_bytes, d.title, d.language, d.version, d.created_at, d.updated_at,
        d.metadata - 'pages' AS metadata,
        (SELECT count(*) FROM chunks c WHERE c.document_id = d.id) AS chunks
   FROM documents d JOIN sources s ON s.id = d.source_id
  WHERE d.id = $1 AND ($2::uuid IS NULL OR d.space_id = $2)";

/// QUERY as the statement every pooled connection prepares: a call is then
/// one exchange with PostgreSQL (`Db::exchange`).
pub static STATEMENT: Prepared = Prepared::new("dp_document_info", QUERY, &["uuid", "uuid"]);

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let rows = deps
        .db
        .exchange(
            Scope::User(ctx.user_id),
            &STATEMENT,
            &[Param::Uuid(args.document_id), Param::OptUuid(ctx.space_id)],
        )
        .await
        .map_err(|e| internal(NAME, e))?;
    let Some(row) = rows.first() else {
        return Err(not_found(args.document_id));
    };
    let d = DocRow::from_row(row).map_err(|e| internal(NAME, e))?;
    Ok(Output {
        document_id: d.id,
        space_id: d.space_id,
        source_id: d.source_id,
        source: d.source,
        path: d.path,
        name: d.name,
        mime: d.mime,
        size_bytes: d.size_bytes,
        title: d.title,
        language: d.language,
        version: d.version,
        chunks: d.chunks,
        ingested_at: d.created_at,
        updated_at: d.updated_at,
        metadata: d.metadata,
    })
}

struct DocRow {
    id: Uuid,
    space_id: Uuid,
    source_id: Uuid,
    source: String,
    path: String,
    name: String,
    mime: String,
    size_bytes: i64,
    title: Option<String>,
    language: Option<String>,
    version: i32,
    created_at: chrono::DateTime<chrono::Utc>,
    updated_at: chrono::DateTime<chrono::Utc>,
    metadata: Value,
    chunks: i64,
}
data_plane_store::from_row!(DocRow {
    id,
    space_id,
    source_id,
    source,
    path,
    name,
    mime,
    size_bytes,
    title,
    language,
    version,
    created_at,
    updated_at,
    metadata,
    chunks
});

/// The same answer whether the document does not exist or is in a space the
/// caller cannot read: nothing about other spaces leaks.
pub fn not_found(id: Uuid) -> ToolError {
    ToolError::not_found(format!(
        "no document {id} in the spaces this request can read"
    ))
}

const NAME: &str = "document_info";
