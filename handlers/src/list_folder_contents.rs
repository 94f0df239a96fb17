//! list_folder_contents: folders and documents in one folder, paginated; also
//! how both navigation tools find a folder of a source from a path, and the
//! not-found answer that points at the folders that do exist.

use std::time::Duration;

use chrono::{DateTime, Utc};
use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, Permission, RateLimits, ToolContext, ToolError,
    ToolMeta,
};
use data_plane_store::ScopedTx;
use data_plane_store::content::normalize_path;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Deps;
use crate::deps::internal;
use data_plane_registry::suggest::{Closeness, close_names_by};

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

/// Entries per page unless the call asks otherwise, and the most it may ask for.
const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 200;

/// A sub-folder, with what it holds so the model can decide where to go next.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FolderEntry {
    pub name: String,
    pub path: String,
    /// Documents directly inside.
    pub documents: i64,
    /// Sub-folders directly inside.
    pub folders: i64,
}
data_plane_store::from_row!(FolderEntry {
    name,
    path,
    documents,
    folders
});

#[derive(Debug, Serialize, JsonSchema)]
pub struct DocumentEntry {
    pub document_id: Uuid,
    pub name: String,
    pub path: String,
    pub mime: String,
    pub size_bytes: i64,
    pub title: Option<String>,
    pub updated_at: DateTime<Utc>,
}
data_plane_store::from_row!(DocumentEntry {
    document_id,
    name,
    path,
    mime,
    size_bytes,
    title,
    updated_at
});

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub source_id: Uuid,
    pub source: String,
    /// The folder listed, normalised ("" is the top of the source).
    pub path: String,
    /// This page: folders first, then documents, each in name order.
    pub folders: Vec<FolderEntry>,
    pub documents: Vec<DocumentEntry>,
    /// Entries in the whole folder (folders plus documents).
    pub total: u64,
    pub total_folders: u64,
    pub total_documents: u64,
    pub offset: u64,
    /// The offset of the next page, absent on the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let offset = args.offset.unwrap_or(0);
    let mut tx = deps.read(NAME, ctx).await?;
    let folder = resolve_folder(
        NAME,
        deps,
        &mut tx,
        ctx,
        args.source_id,
        args.path.as_deref(),
    )
    .await?;

    let (total_folders, total_documents): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM folders WHERE parent_id = $1),
                (SELECT count(*) FROM documents WHERE folder_id = $1)",
    )
    .bind(folder.id)
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| internal(NAME, e))?;
    let total_folders = total_folders.max(0) as u64;
    let total_documents = total_documents.max(0) as u64;
    let total = total_folders + total_documents;
    if offset > 0 && offset >= total {
        return Err(ToolError::invalid(format!(
            "offset {offset} is past the end of {} ({total} entries); start again from offset 0",
            shown(&folder.path)
        )));
    }

    // Folders and documents are two ordered runs of one list; a page may
    // straddle them. Both queries walk a (parent, name) index, so a page
    // costs its own size plus the offset, never a sort of the whole folder;
    // sub-folders are counted for the page only, not for the rows skipped.
    let mut folders = Vec::new();
    if offset < total_folders {
        folders = sqlx::query_as::<_, FolderEntry>(
            "SELECT p.name, p.path,
                    (SELECT count(*) FROM documents d WHERE d.folder_id = p.id) AS documents,
                    (SELECT count(*) FROM folders c WHERE c.parent_id = p.id) AS folders
               FROM (SELECT id, name, path FROM folders
                      WHERE parent_id = $1
                      ORDER BY name
                      LIMIT $2 OFFSET $3) p
              ORDER BY p.name",
        )
        .bind(folder.id)
        .bind(limit as i64)
        .bind(offset as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| internal(NAME, e))?;
    }
    let room = limit - folders.len() as u64;
    let mut documents = Vec::new();
    if room > 0 && offset + (folders.len() as u64) < total {
        let doc_offset = offset.saturating_sub(total_folders);
        documents = sqlx::query_as::<_, DocumentEntry>(
            "SELECT id AS document_id, name, path, mime, size_bytes, title, updated_at
               FROM documents
              WHERE folder_id = $1
              ORDER BY name
              LIMIT $2 OFFSET $3",
        )
        .bind(folder.id)
        .bind(room as i64)
        .bind(doc_offset.min(i64::MAX as u64) as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| internal(NAME, e))?;
    }
    let end = offset + (folders.len() + documents.len()) as u64;
    Ok(Output {
        source_id: folder.source_id,
        source: folder.source,
        path: folder.path,
        folders,
        documents,
        total,
        total_folders,
        total_documents,
        offset,
        next_offset: (end < total).then_some(end),
    })
}

const NAME: &str = "list_folder_contents";

/// A folder of a source in the call's space.
#[derive(Debug)]
pub(crate) struct ResolvedFolder {
    pub id: Uuid,
    pub source_id: Uuid,
    pub source: String,
    /// Normalised: no leading or trailing slash, "" for the top.
    pub path: String,
}

/// Finds the folder at `path` in the source, which must belong to the call's
/// space. A source of another space gets the same answer as one that does not
/// exist; a missing folder gets an answer naming the folders that do.
pub(crate) async fn resolve_folder(
    tool: &str,
    deps: &Deps,
    tx: &mut ScopedTx,
    ctx: &ToolContext,
    source_id: Uuid,
    path: Option<&str>,
) -> Result<ResolvedFolder, ToolError> {
    deps.spaces(tool, tx, ctx).await?;
    let Some(space_id) = ctx.space_id else {
        return Err(ToolError::invalid(format!(
            "{tool} needs a space (spaceId)"
        )));
    };
    let raw = path.unwrap_or("").trim();
    let path = normalize_path(raw).map_err(|_| {
        ToolError::invalid(format!(
            "path {raw:?} must not contain '..'; give the folder's path from the top of the source, e.g. `guides/setup`"
        ))
    })?;
    let source: Option<String> =
        sqlx::query_scalar("SELECT name FROM sources WHERE id = $1 AND space_id = $2")
            .bind(source_id)
            .bind(space_id)
            .fetch_optional(&mut **tx)
            .await
            .map_err(|e| internal(tool, e))?;
    let Some(source) = source else {
        return Err(ToolError::not_found(format!(
            "no source {source_id} in this space; list_sources gives the sources of the space"
        )));
    };
    let id: Option<Uuid> =
        sqlx::query_scalar("SELECT id FROM folders WHERE source_id = $1 AND path = $2")
            .bind(source_id)
            .bind(&path)
            .fetch_optional(&mut **tx)
            .await
            .map_err(|e| internal(tool, e))?;
    match id {
        Some(id) => Ok(ResolvedFolder {
            id,
            source_id,
            source,
            path,
        }),
        None => Err(folder_not_found(tool, tx, source_id, &source, &path).await?),
    }
}

/// Most folder names one not-found answer lists.
const MAX_NAMED: usize = 20;

/// Explains a missing folder: a document at that path, close names among the
/// deepest existing ancestor's sub-folders, folders of that name elsewhere in
/// the source, or else what the ancestor does hold.
async fn folder_not_found(
    tool: &str,
    tx: &mut ScopedTx,
    source_id: Uuid,
    source: &str,
    path: &str,
) -> Result<ToolError, ToolError> {
    let db = |e: sqlx::Error| internal(tool, e);
    let document: Option<Uuid> =
        sqlx::query_scalar("SELECT id FROM documents WHERE source_id = $1 AND path = $2")
            .bind(source_id)
            .bind(path)
            .fetch_optional(&mut **tx)
            .await
            .map_err(db)?;
    if let Some(document_id) = document {
        return Ok(ToolError::not_found(format!(
            "{path:?} in source {source:?} is a document, not a folder; read it with read_document (document_id {document_id})"
        )));
    }

    let segments: Vec<&str> = path.split('/').collect();
    let prefixes: Vec<String> = (0..segments.len())
        .map(|n| segments[..n].join("/"))
        .collect();
    let ancestor: Option<(Uuid, String)> = sqlx::query_as(
        "SELECT id, path FROM folders WHERE source_id = $1 AND path = ANY($2)
          ORDER BY length(path) DESC LIMIT 1",
    )
    .bind(source_id)
    .bind(&prefixes)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db)?;
    let Some((ancestor_id, ancestor_path)) = ancestor else {
        return Ok(ToolError::not_found(format!(
            "no folder {path:?} in source {source:?}; the source holds no folders yet"
        )));
    };
    let depth = if ancestor_path.is_empty() {
        0
    } else {
        ancestor_path.split('/').count()
    };
    let wanted = segments[depth];
    let last = segments[segments.len() - 1];

    let children: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM folders WHERE parent_id = $1 ORDER BY name LIMIT 1000",
    )
    .bind(ancestor_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(db)?;
    let join = |name: &str| {
        if ancestor_path.is_empty() {
            name.to_string()
        } else {
            format!("{ancestor_path}/{name}")
        }
    };
    let mut suggestions: Vec<String> = close_names_by(
        wanted,
        children.iter().map(String::as_str),
        Closeness::FOLDER_NAMES,
    )
    .into_iter()
    .map(join)
    .collect();

    // The folder may exist, only not where the path put it.
    let elsewhere: Vec<String> = sqlx::query_scalar(
        "SELECT path FROM folders
          WHERE source_id = $1 AND parent_id IS NOT NULL AND lower(name) = lower($2)
          ORDER BY path LIMIT 5",
    )
    .bind(source_id)
    .bind(last)
    .fetch_all(&mut **tx)
    .await
    .map_err(db)?;
    for p in elsewhere {
        if !suggestions.contains(&p) {
            suggestions.push(p);
        }
    }

    let message = if !suggestions.is_empty() {
        format!(
            "no folder {path:?} in source {source:?}; did you mean {}?",
            quoted(&suggestions).join(" or ")
        )
    } else if children.is_empty() {
        format!(
            "no folder {path:?} in source {source:?}; {} has no sub-folders",
            shown(&ancestor_path)
        )
    } else {
        let named: Vec<String> = children.iter().take(MAX_NAMED).map(|n| join(n)).collect();
        let more = if children.len() > MAX_NAMED {
            format!(" and {} more", children.len() - MAX_NAMED)
        } else {
            String::new()
        };
        format!(
            "no folder {path:?} in source {source:?}; {} holds the folders {}{more}",
            shown(&ancestor_path),
            quoted(&named).join(", ")
        )
    };
    Ok(ToolError::not_found(message))
}

fn quoted(names: &[String]) -> Vec<String> {
    names.iter().map(|n| format!("{n:?}")).collect()
}

/// A folder path as prose: the top of the source has the empty path.
pub(crate) fn shown(path: &str) -> String {
    if path.is_empty() {
        "the top of the source".to_string()
    } else {
        format!("{path:?}")
    }
}
