//! find_by_name: documents whose path or name matches a glob.
//!
//! globset decides what matches; the literal text of the pattern first
//! narrows the rows through the trigram indexes on lower(name) and
//! lower(path), by way of `dp_document_candidates` (see prefilter.rs and
//! migration 0008). Rows are read in path order through a
//! cursor, so a pattern that matches early stops early.

use std::time::Duration;

use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, ErrorCode, Permission, RateLimits, TagSpec,
    ToolContext, ToolError, ToolMeta,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

use crate::Deps;
use crate::deps::internal;
use crate::prefilter::{Candidates, NameGlob};

/// The arguments, as definitions/find_by_name.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Glob pattern: `*` any characters except `/`, `**` any folders, `?` one character, `{a,b}` alternatives, `[abc]` a class. A pattern without `/` is matched against the file name, one with `/` against the path inside the source.
    pub pattern: String,
    /// Match case exactly.
    pub case_sensitive: Option<bool>,
    /// Only look in this source.
    pub source_id: Option<Uuid>,
    /// Most documents to return.
    pub limit: Option<u64>,
    /// Matching documents to skip before the first one returned, to page through results (the `more` hint of a previous call gives the value).
    pub skip: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Search,
    short_description: "documents whose path or name matches a glob",
    available_when: "always",
    aliases: &["find", "glob"],
    annotations: AnnotationHints::DERIVED,
    cost: CostTier::Cheap,
    permission: Permission::Guest,
    timeout: Duration::from_millis(10000),
    limits: RateLimits::NONE,
    requires_gate: false,
    defer_loading: false,
    tag: Some(TagSpec {
        tag_prefix: "FIND",
        pattern: r"(?P<pattern>.+)",
        example: "FIND: **/*.csv",
        strip_from_display: true,
    }),
};

pub fn available(_ctx: &ToolContext) -> bool {
    true
}

const NAME: &str = "find_by_name";
const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 500;
const CURSOR_BATCH: i64 = 500;
/// Inside the tool's timeout, so a slow lookup ends with a clear message.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(8);

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Matching documents in path order.
    pub documents: Vec<Found>,
    pub returned: usize,
    /// Present when more documents match than were returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<More>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Found {
    pub document_id: Uuid,
    pub path: String,
    pub name: String,
    pub source_id: Uuid,
    pub source: String,
    pub mime: String,
    pub size_bytes: i64,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}
data_plane_store::from_row!(Found {
    document_id,
    path,
    name,
    source_id,
    source,
    mime,
    size_bytes,
    updated_at
});

#[derive(Debug, Serialize, JsonSchema)]
pub struct More {
    /// Pass as `skip` to continue where this answer stopped.
    pub skip: u64,
    pub hint: String,
}

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let glob = NameGlob::new(
        &args.pattern,
        args.case_sensitive.unwrap_or(false),
        "pattern",
    )?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
    let skip = args.skip.unwrap_or(0);

    let mut tx = deps.read(NAME, ctx).await?;
    let spaces = deps.spaces(NAME, &mut tx, ctx).await?;
    if let Some(source) = args.source_id {
        let visible: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sources WHERE id = $1 AND space_id = ANY($2))",
        )
        .bind(source)
        .bind(&spaces)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| internal(NAME, e))?;
        if !visible {
            return Err(ToolError::not_found(format!(
                "no source {source} in the spaces this request can read"
            )));
        }
    }

    let mut declare: QueryBuilder<Postgres> = QueryBuilder::new(
        "DECLARE find_candidates NO SCROLL CURSOR FOR
         SELECT d.id AS document_id, d.path, d.name, d.source_id, s.name AS source, d.mime,
                d.size_bytes, d.updated_at
           FROM documents d JOIN sources s ON s.id = d.source_id
          WHERE d.space_id = ANY(",
    );
    declare.push_bind(&spaces).push(")");
    if let Some(source) = args.source_id {
        declare.push(" AND d.source_id = ").push_bind(source);
    }
    let mut candidates = Candidates::default();
    candidates.add_glob(&glob);
    candidates.push_filter(&mut declare, &spaces);
    declare.push(" ORDER BY d.path, d.id");
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(STATEMENT_TIMEOUT.as_millis().to_string())
        .execute(&mut *tx)
        .await
        .map_err(|e| internal(NAME, e))?;
    declare
        .build()
        .persistent(false)
        .execute(&mut *tx)
        .await
        .map_err(|e| internal(NAME, e))?;

    let mut documents = Vec::new();
    let mut seen = 0u64;
    let mut more = false;
    'fetch: loop {
        let rows: Vec<Found> =
            sqlx::query_as(&format!("FETCH {CURSOR_BATCH} FROM find_candidates"))
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| match e {
                    sqlx::Error::Database(d) if d.code().as_deref() == Some("57014") => {
                        ToolError::new(
                            ErrorCode::Timeout,
                            format!(
                                "finding {:?} took too long; give source_id or a pattern with a longer literal part",
                                args.pattern
                            ),
                        )
                    }
                    e => internal(NAME, e),
                })?;
        if rows.is_empty() {
            break;
        }
        for row in rows {
            if !glob.is_match(&row.path, &row.name) {
                continue;
            }
            seen += 1;
            if seen <= skip {
                continue;
            }
            if documents.len() >= limit {
                more = true;
                break 'fetch;
            }
            documents.push(row);
        }
    }
    drop(tx);
    let next = skip + documents.len() as u64;
    Ok(Output {
        returned: documents.len(),
        documents,
        more: more.then(|| More {
            skip: next,
            hint: format!(
                "more documents match; call again with skip: {next} for the next ones, or narrow the pattern or give source_id"
            ),
        }),
    })
}
